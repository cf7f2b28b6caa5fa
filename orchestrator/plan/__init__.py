"""Planning: everything the pure stages produce for one profile, computed once.

`orchestrator.plan.build` runs the stages (`load_and_plan`, `plan_profile`);
`orchestrator.plan.types` holds what they produce (`DeploymentPlan`, `RejectedPlan`), and
`orchestrator.plan.resolver` the checkpoint-source seam. This module imports nothing, so lower
stages can import the types without a cycle.
"""
