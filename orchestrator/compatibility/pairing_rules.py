"""Pairing rules: does the proposer checkpoint fit the target, on this engine, from metadata alone?

Each rule compares one fact read up front into `CheckpointInfo` (no I/O here). When a needed fact
is unknown the rule says so as an `info` finding with how to make it checkable; it never passes
silently. A checkpoint that could not be resolved at all is reported once, by
`checkpoint.unresolved`, and the other rules skip it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from orchestrator.checkpoint.catalog import (
    answering_catalog,
    catalog_entry,
    catalog_info,
    catalog_models,
)
from orchestrator.checkpoint.compare import compare_tokenizers, normalise_model_name
from orchestrator.checkpoint.info import CheckpointInfo, EagleHeadInfo, Unresolved
from orchestrator.checkpoint.resolution import looks_like_path
from orchestrator.compatibility.rule import Check, CompatContext, Finding, rule
from orchestrator.compatibility.unchecked import at_field, cannot_check
from orchestrator.engines import ENGINES
from orchestrator.engines.capabilities import known_versions, release_for
from orchestrator.engines.names import ENGINE_NAMES

_GENERATION_NAME = {"eagle1": "EAGLE-1/2", "eagle3": "EAGLE-3"}
_UNPINNED = frozenset({"main", "master", "head"})


def _about(field: str) -> Callable[[Check], Check]:
    """Stamp the profile field a rule's findings are about (unless a finding names its own)."""

    def wrap(check: Check) -> Check:
        @functools.wraps(check)
        def stamped(ctx: CompatContext) -> Finding | list[Finding] | None:
            result = check(ctx)
            if isinstance(result, Finding):
                return result if result.field else at_field(field, result)
            return result

        return stamped

    return wrap


def _draft_model(ctx: CompatContext) -> bool:
    return ctx.method == "draft_model"


def _eagle(ctx: CompatContext) -> bool:
    return ctx.method in ("eagle", "eagle3")


def _eagle3(ctx: CompatContext) -> bool:
    return ctx.method == "eagle3"


def _mtp(ctx: CompatContext) -> bool:
    return ctx.method == "mtp"


@rule(
    "checkpoint.unresolved",
    source="orchestrator/checkpoint/resolution.py (resolution order: local directory, HF cache, "
    "hub, built-in catalog)",
)
def checkpoint_resolved(ctx: CompatContext) -> list[Finding]:
    """Every pairing and memory check needs the checkpoint's metadata. A model specdeploy cannot
    find anywhere allowed is an error, never a silent pass: the engine would fail (or worse, load
    something else) only once the pod starts."""
    return [_unresolved(u) for u in ctx.unresolved]


def _unresolved(u: Unresolved) -> Finding:
    rev = f" at revision {u.revision}" if u.revision else ""
    return at_field(
        u.field,
        Finding.error(
            what=f"{u.field}: {u.model}{rev} could not be resolved (tried: {'; '.join(u.tried)})",
            why="without its config.json specdeploy cannot check the pairing or the memory budget",
            fix=u.suggestion(),
        ),
    )


@rule(
    "checkpoint.user-catalog",
    source="orchestrator/checkpoint/catalog/user.py (the user catalog ranks above the built-in "
    "one); docs/cli.md#catalogs",
)
def user_catalog_named(ctx: CompatContext) -> list[Finding]:
    """A model answered by the user catalog is checked against facts someone recorded with
    `catalog add`, not against its files; when the entry has a built-in entry's id (a 0.6B
    checkpoint recorded as Qwen/Qwen3-8B) it silently replaces those facts. Say which file the
    facts came from, and what they shadow, so a wrong recording is visible in every report."""
    fields = (("target.model", ctx.target), ("proposer.model", ctx.draft))
    return [
        at_field(field, _from_user_catalog(field, info))
        for field, info in fields
        if info is not None and answering_catalog(info) == "user"
    ]


def _from_user_catalog(field: str, info: CheckpointInfo) -> Finding:
    built_in = catalog_entry(info.ref)
    shadows = (
        f"; it shadows the built-in catalog entry {built_in.model} ({built_in.location})"
        if built_in is not None
        else ""
    )
    return Finding.info(
        what=f"{field}: {info.ref}: facts from the {info.location}{shadows}",
        why="specdeploy checked the facts recorded by `specdeploy catalog add`, not the "
        "checkpoint's files; if the entry is not the checkpoint that will be served, every check "
        "is about another model",
        fix=f"nothing to do if the entry is this checkpoint (`specdeploy catalog show {info.ref}` "
        "shows it); after the checkpoint changes, record it again with `specdeploy catalog add`",
    )


@rule(
    "pairing.draft-tokenizer",
    source="https://github.com/ggml-org/llama.cpp/pull/3812 (llama.cpp compares drafts token by "
    "token); https://github.com/QwenLM/Qwen3/issues/885 (one Qwen tokenizer, vocab_size padded to "
    "151936 or 152064); orchestrator/checkpoint/catalog/tokenizers.json (tokenizer families, each "
    "with its source)",
    applies=_draft_model,
)
@_about("proposer.model")
def draft_tokenizer_matches(ctx: CompatContext) -> Finding | None:
    """The target verifies the draft's token ids directly, so both must mean the same strings by
    the same ids. Equal vocab_size proves nothing (Llama-2 and Mistral both have 32000 tokens);
    the comparison is by tokenizer file content, or by documented family for catalog models."""
    target, draft = ctx.target, ctx.draft
    if target is None or draft is None:
        return None
    cmp = compare_tokenizers(target, draft)
    pair = f"proposer.model {draft.ref} vs target.model {target.ref}"
    if cmp.verdict == "same":
        return None
    if cmp.verdict == "unknown":
        return cannot_check(f"{pair}: tokenizers not compared ({cmp.detail})", draft, target)
    if cmp.verdict == "related":
        return Finding.warning(
            what=f"{pair}: tokenizers share their base vocabulary but differ in added or special "
            f"tokens ({cmp.detail})",
            why="the draft never proposes the tokens only the target has, so acceptance drops "
            "wherever the target emits them (e.g. Qwen3 <think> tokens)",
            fix=f"prefer a draft with exactly {target.ref}'s tokenizer (same model family and "
            "release)",
        )
    return Finding.error(
        what=f"{pair}: tokenizers differ ({cmp.detail})",
        why="the target would verify ids that mean other strings to the draft: acceptance "
        "collapses to about 1 token and speculation only adds latency",
        fix=f"set proposer.model to a draft from {target.ref}'s model family (same tokenizer), "
        "or set proposer.method: ngram",
    )


@rule(
    "pairing.draft-vocab-size",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L1870-L1884 (vLLM "
    "verify_equal_vocab_size_if_draft_model); "
    "https://github.com/sgl-project/sglang/blob/v0.5.14/python/sglang/srt/speculative/"
    "standalone_worker_v2.py (SGLang STANDALONE up to 0.5.14: no size check; from 0.5.15 "
    "_validate_vocab_compatibility refuses unequal sizes, "
    "https://github.com/sgl-project/sglang/blob/v0.5.15/python/sglang/srt/speculative/"
    "standalone_worker_v2.py#L215-L240); "
    "https://nvidia.github.io/TensorRT-LLM/1.2.0/features/speculative-decoding.html#draft-target "
    "(TensorRT-LLM DraftTarget: same tokenizer required by the docs, no size check)",
    applies=_draft_model,
)
@_about("proposer.model")
def draft_vocab_size_matches(ctx: CompatContext) -> Finding | None:
    """vLLM, and SGLang (STANDALONE) from 0.5.15, refuse a draft_model whose vocab_size differs
    from the target's, even when only the embedding padding differs (Qwen2.5-7B pads to 152064,
    1.5B to 151936). SGLang before 0.5.15 and TensorRT-LLM (DraftTarget) do not compare sizes: a
    padding-only difference of one tokenizer is fine as long as the draft cannot propose ids past
    the target's vocabulary."""
    target, draft = ctx.target, ctx.draft
    if target is None or draft is None:
        return None
    tv, dv = target.vocab_size, draft.vocab_size
    if tv is None or dv is None:
        return cannot_check("draft/target vocab_size unknown (config.json missing)", draft, target)
    if tv == dv:
        return None
    what = (
        f"proposer.model {draft.ref} vocab_size={dv} but target.model {target.ref} vocab_size={tv}"
    )
    verdict = compare_tokenizers(target, draft).verdict
    if ENGINES[ctx.engine].draft_vocab_must_match(ctx.release):
        padding_only = verdict in ("same", "related")
        return Finding.error(
            what=what,
            why=f"{ctx.engine} {ctx.profile.engine.version} refuses to start: draft_model requires "
            "equal vocab_size, padding included",
            fix=f"choose a draft with vocab_size {tv}"
            + (
                f", or set engine.name: {_lenient_vocab_engines()} (padding-only differences "
                "are accepted there)"
                if padding_only
                else ""
            )
            + ", or set proposer.method: ngram",
        )
    if verdict == "different":
        return None  # not a padding question: pairing.draft-tokenizer reports it
    if verdict == "unknown":
        return cannot_check(
            f"{what}; telling padding from a different vocabulary needs both tokenizers",
            draft,
            target,
        )
    if dv > tv:
        return Finding.warning(
            what=f"{what}: the draft can propose ids {tv}..{dv - 1} the target does not have",
            why="those padding rows are untrained, so this is rare, but such an id would be "
            "outside the target's embedding",
            fix=f"choose a draft whose vocab_size is at most {tv}",
        )
    return None


@rule(
    "pairing.eagle-head-hidden-size",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle3.py#L218-L250 (fc input = "
    "target_hidden_size x 3, else hidden_size x 3); "
    "https://github.com/vllm-project/vllm/issues/18906",
    applies=_eagle,
)
@_about("proposer.model")
def eagle_head_hidden_size_matches(ctx: CompatContext) -> Finding | None:
    """An EAGLE head reads the target's hidden states, so it only fits a target of the hidden
    size it was trained on (`target_hidden_size`, else its own `hidden_size`). A head for another
    width fails to load or, where shapes happen to fit, accepts almost nothing."""
    target, head = ctx.target, _head(ctx)
    if target is None or head is None:
        return None  # unresolved or not a head: checkpoint.unresolved / pairing.eagle-generation
    if head.target_hidden_size is None:
        return cannot_check(
            "the hidden size the EAGLE head was trained for is unknown",
            ctx.draft,
            None,
            facts=("target_hidden_size", "hidden_size"),
        )
    if target.hidden_size is None:
        return cannot_check(
            "the target's hidden size is unknown", target, None, facts=("hidden_size",)
        )
    if head.target_hidden_size == target.hidden_size:
        return None
    built_for = f"hidden size {head.target_hidden_size}"
    if head.target_hidden_size_from:
        built_for += f" (that of {head.target_hidden_size_from}, its verifier in the catalog)"
    return Finding.error(
        what=f"proposer.model {_ref(ctx)} is an {_GENERATION_NAME[head.generation]} head built "
        f"for {built_for} but target.model {target.ref} has "
        f"hidden_size={target.hidden_size}",
        why="the head cannot read this target's hidden states: load fails or acceptance is ~1",
        fix=f"set proposer.model to an EAGLE head trained for {target.ref}, or set "
        "proposer.method: ngram",
    )


@rule(
    "pairing.eagle-head-vocab",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle3.py#L335-L345 (a draft_vocab_size below the "
    "target's needs d2t, loaded as draft_id_to_target_id) and #L378-L390 (d2t offsets draft ids "
    "into the target vocab)",
    applies=_eagle,
)
@_about("proposer.model")
def eagle_head_vocab_matches(ctx: CompatContext) -> Finding | None:
    """A head's token ids must land in the target's vocabulary: its `vocab_size` must equal the
    target's, and a reduced `draft_vocab_size` needs the `d2t` map that translates draft ids into
    target ids (vLLM loads it as draft_id_to_target_id)."""
    target, head = ctx.target, _head(ctx)
    if target is None or head is None:
        return None
    if head.vocab_size is None or target.vocab_size is None:
        return cannot_check("EAGLE head or target vocab_size unknown", ctx.draft, target)
    what = f"proposer.model {_ref(ctx)} head vocab_size={head.vocab_size}"
    if head.vocab_size != target.vocab_size:
        return Finding.error(
            what=f"{what} but target.model {target.ref} vocab_size={target.vocab_size}",
            why="the head predicts ids of another vocabulary: wrong tokens or an index error",
            fix=f"set proposer.model to an EAGLE head trained for {target.ref}",
        )
    reduced = head.draft_vocab_size is not None and head.draft_vocab_size < head.vocab_size
    if reduced and head.has_d2t is None:
        return cannot_check(
            f"{what}, draft_vocab_size={head.draft_vocab_size}: d2t map not "
            "checked (no weight index)",
            ctx.draft,
            target,
        )
    if reduced and head.has_d2t is False:
        return Finding.error(
            what=f"{what}, draft_vocab_size={head.draft_vocab_size}, but the weights have no d2t",
            why="without d2t the engine cannot map draft ids back to target ids",
            fix="use the head's full export (with d2t/t2d buffers) or another head",
        )
    return None


def _lenient_vocab_engines() -> str:
    """Engines whose newest supported release accepts a padding-only vocab_size difference."""
    return " or ".join(
        name
        for name in ENGINE_NAMES
        if not ENGINES[name].draft_vocab_must_match(release_for(name, known_versions(name)[-1]))
    )


@rule(
    "pairing.eagle-generation",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle.py#L146-L196 (vLLM EagleLlamaForCausalLM "
    "loads with AutoWeightsLoader, which refuses EAGLE-3 tensors); "
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/models/llama_eagle3.py#L237-L238 and https://github.com/sgl-project/sglang/pull/21272 "
    "(SGLang: an EAGLE-3 head run as EAGLE skips fc, accept length 1.0)",
    applies=lambda ctx: _eagle(ctx) and ENGINES[ctx.engine].serves_eagle1_heads,
)
@_about("proposer.model")
def eagle_generation_matches(ctx: CompatContext) -> Finding | None:
    """EAGLE-1/2 heads read one hidden state, EAGLE-3 heads three: a head of the other generation
    fails to load, except where the engine builds the draft from the head's own config and runs
    an EAGLE-3 head as EAGLE with acceptance ~1.0 (SGLang): that serves, slower than no
    speculation, so it is a warning. TensorRT-LLM is left to engine.trtllm-eagle-checkpoint (it
    serves EAGLE-3 only and maps `Eagle` onto it)."""
    draft = ctx.draft
    if draft is None:
        return None
    wanted = "eagle3" if ctx.method == "eagle3" else "eagle1"
    head = draft.eagle
    if head is None:
        return _not_a_head(ctx, draft)
    if head.generation == wanted:
        return None
    method = "eagle3" if head.generation == "eagle3" else "eagle"
    what = (
        f"proposer.method: {ctx.method} but proposer.model {draft.ref} is an "
        f"{_GENERATION_NAME[head.generation]} head ({head.format} format)"
    )
    fix = f"set proposer.method: {method}, or use an {_GENERATION_NAME[wanted]} head"
    if head.generation == "eagle3" and ENGINES[ctx.engine].runs_eagle3_head_as_eagle1:
        return Finding.warning(
            what=what,
            why=f"{ctx.engine} loads the head but feeds it one hidden state instead of three: "
            "acceptance falls to ~1.0, slower than serving without speculation",
            fix=fix,
        )
    return Finding.error(
        what=what,
        why=f"{ctx.engine} builds the other head architecture and fails to load the checkpoint",
        fix=fix,
    )


@rule(
    "pairing.eagle-aux-layers",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/interfaces.py#L1712-L1732 (vLLM default ids 2, N//2, "
    "N-3: inputs of target layers); https://github.com/sgl-project/sglang/pull/25454 (SGLang "
    "shifts explicit ids by one); https://github.com/sgl-project/sglang/pull/32334 (heads that "
    "use boundary id N): valid ids are 0..num_hidden_layers",
    applies=_eagle3,
)
@_about("proposer.model")
def eagle_aux_layers_exist(ctx: CompatContext) -> Finding | None:
    """EAGLE-3 heads read hidden states of chosen target layers. Ids beyond the target's layer
    count mean the head was trained on a deeper target (e.g. a gpt-oss-120b head, ids up to 36,
    on the 24-layer gpt-oss-20b). Without explicit ids the engine's in-range defaults apply."""
    target, head = ctx.target, _head(ctx)
    if target is None or head is None or head.aux_layer_ids is None:
        return None
    layers = target.num_hidden_layers
    if layers is None:
        return cannot_check("target num_hidden_layers unknown", ctx.draft, target)
    outside = [i for i in head.aux_layer_ids if not 0 <= i <= layers]
    if not outside:
        return None
    return Finding.error(
        what=f"proposer.model {_ref(ctx)} reads target layers {list(head.aux_layer_ids)} but "
        f"target.model {target.ref} has num_hidden_layers={layers} (out of range: {outside})",
        why="the head was trained for a deeper target; it fails to load or accepts ~nothing",
        fix=f"set proposer.model to an EAGLE-3 head trained for {target.ref}",
    )


@rule(
    "pairing.speculators-format",
    source="https://github.com/vllm-project/vllm/pull/21345 (vLLM loads speculators-format heads "
    "from 0.10.1); https://github.com/sgl-project/sglang/tree/v0.5.23/python/sglang (no code in "
    "SGLang 0.5.23 reads speculators_config)",
    applies=lambda ctx: _eagle(ctx) and _head(ctx) is not None,
)
@_about("proposer.model")
def speculators_format_is_read(ctx: CompatContext) -> Finding | None:
    """A head in the speculators format keeps its layer in `transformer_layer_config` and its
    pairing in `speculators_config`; an engine without code for that format cannot build the
    head from it (SGLang looks for an `Eagle3Speculator` model class it does not have)."""
    head = _head(ctx)
    if head is None or head.format != "speculators":
        return None
    reads = ENGINES[ctx.engine].reads_speculators_heads(ctx.release)
    if reads:
        return None
    readers = _speculators_readers()
    what = (
        f"proposer.model {_ref(ctx)} is an EAGLE head in the speculators format, which "
        f"{ctx.release.engine} {ctx.release.version} "
    )
    fix = (
        f"use the head in its original EAGLE format for this target, or set engine.name: "
        f"{readers} (they load speculators heads)"
    )
    if reads is None:
        return Finding.warning(
            what=what + "was not checked to load",
            why="if the engine has no code for the format, the head fails to load at start-up",
            fix=fix + ", or check the engine's documentation for speculators support",
        )
    return Finding.error(
        what=what + "has no code to load",
        why="the engine cannot build the head from this config: start-up fails",
        fix=fix,
    )


def _speculators_readers() -> str:
    """Engines with a release that loads speculators heads, from their first such release."""
    readers = []
    for name in ENGINE_NAMES:
        engine = ENGINES[name]
        first = next(
            (
                v
                for v in known_versions(name)
                if engine.reads_speculators_heads(release_for(name, v))
            ),
            None,
        )
        if first is not None:
            readers.append(f"{name} (from {first})")
    return " or ".join(readers) or "an engine that does"


@rule(
    "pairing.speculators-verifier",
    source="https://github.com/vllm-project/speculators/blob/v0.7.0/src/speculators/config.py"
    "#L40-L47 (VerifierConfig: the verifier a head was trained against); "
    "https://huggingface.co/RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3/commit/"
    "5b6cee4e4955edb3c90f2a39d1d804fbee5ce0ae (a published head whose verifier name_or_path is a "
    "local path)",
    applies=lambda ctx: _eagle(ctx) and _head(ctx) is not None,
)
@_about("proposer.model")
def speculators_verifier_matches(ctx: CompatContext) -> Finding | None:
    """A speculators-format head records the verifier it was trained against. The field is
    user-supplied and often a local path or a quantized variant's name, so names are normalised
    (last two path parts, lower case, quantization suffixes removed) and a mismatch only warns."""
    target, head = ctx.target, _head(ctx)
    if target is None or head is None or head.format != "speculators":
        return None
    if head.verifier_name is None:
        return cannot_check("speculators config names no verifier", ctx.draft, target)
    v_org, v_name = normalise_model_name(head.verifier_name)
    t_org, t_name = normalise_model_name(target.ref)
    org_differs = v_org is not None and t_org is not None and target.source != "local"
    archs = head.verifier_architectures and target.architectures
    if (
        v_name == t_name
        and not (org_differs and v_org != t_org)
        and not (archs and set(head.verifier_architectures) != set(target.architectures))
    ):
        return None
    return Finding.warning(
        what=f"proposer.model {_ref(ctx)} names verifier {head.verifier_name!r} "
        f"({list(head.verifier_architectures)}) but target.model is {target.ref} "
        f"({list(target.architectures)})",
        why="a head trained against another verifier usually accepts far fewer tokens",
        fix=f"use the speculator trained for {target.ref}, or ignore this warning if "
        f"{target.ref} is the same model under another name",
    )


@rule(
    "pairing.mtp-layers",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/speculative.py#L661-L1074 (vLLM hf_config_override: the MTP layer key "
    "per family, num_nextn_predict_layers / mtp_num_hidden_layers / num_mtp_modules); "
    "https://nvidia.github.io/TensorRT-LLM/1.2.0/features/speculative-decoding.html#mtp "
    "(TensorRT-LLM MTP: num_nextn_predict_layers)",
    applies=_mtp,
)
@_about("proposer.method")
def mtp_layers_declared(ctx: CompatContext) -> Finding | None:
    """method: mtp drafts with the target's own multi-token-prediction layers; a config that
    declares none (num_nextn_predict_layers, mtp_num_hidden_layers, num_mtp_modules) has nothing
    to draft with, and the engine refuses it."""
    target = ctx.target
    if target is None:
        return None
    if "mtp_layers" in target.unverified or "config.json" in target.missing:
        return cannot_check("MTP layer count unknown", target, None, facts=("mtp_layers",))
    if target.mtp_layers > 0:
        return None
    return Finding.error(
        what=f"proposer.method: mtp but target.model {target.ref} declares no MTP layers "
        "(no num_nextn_predict_layers, mtp_num_hidden_layers or num_mtp_modules)",
        why="there are no MTP layers to draft with; the engine refuses to start",
        fix=f"choose a target that ships MTP layers{_mtp_examples(ctx)}, or set "
        "proposer.method: ngram (or eagle3 with a head trained for this target)",
    )


def _mtp_examples(ctx: CompatContext) -> str:
    """Catalog models whose MTP layers this engine release serves, the target's tokenizer family
    first (the same family usually means a similar model a user could switch to)."""
    family = ctx.target.tokenizer_family if ctx.target is not None else None
    found: list[tuple[bool, str]] = []
    for model in catalog_models():
        info = catalog_info(model)
        if info is None or info.mtp_layers <= 0 or "mtp_layers" in info.unverified:
            continue
        if set(info.architectures) & ctx.release.mtp_architectures:
            found.append((info.tokenizer_family != family or family is None, model))
    names = [model for _, model in sorted(found)[:2]]
    served = f"{ctx.release.engine} {ctx.release.version}"
    return f" that {served} serves (e.g. {' or '.join(names)})" if names else ""


@rule(
    "pairing.mtp-weights",
    source="https://github.com/MiniMax-AI/MiniMax-M2/issues/47, "
    "https://github.com/MiniMax-AI/MiniMax-M2.5/issues/8 (MTP in config, no weights)",
    applies=lambda ctx: _mtp(ctx) and ctx.target is not None and ctx.target.mtp_layers > 0,
)
@_about("target.model")
def mtp_weights_present(ctx: CompatContext) -> Finding | None:
    """A config can declare MTP layers whose weights were never published; the engine then
    fails only when it loads the checkpoint. The weight index shows whether they exist."""
    target = ctx.target
    assert target is not None  # guaranteed by applies
    if target.mtp_tensor_count is None:
        return cannot_check("no model.safetensors.index.json to look for MTP tensors", target, None)
    if target.mtp_tensor_count > 0:
        return None
    return Finding.error(
        what=f"target.model {target.ref} declares {target.mtp_layers} MTP layer(s) but its "
        "weight index has no MTP tensors (no mtp/nextn names, no layers past num_hidden_layers)",
        why="the engine fails at load time when it looks for the MTP weights",
        fix="use a checkpoint that publishes its MTP weights, or set proposer.method: ngram",
    )


@rule(
    "pairing.revision-pinned",
    source="https://github.com/kaito-project/kaito/blob/0567d7f2e5040e991cc9c88a02d43d6befe15816/"
    "presets/workspace/models/supported_models.yaml (Kaito pins every preset model to a Hugging "
    "Face commit); profile.schema.json (target.revision, proposer.revision)",
)
def revisions_pinned(ctx: CompatContext) -> list[Finding]:
    """A hub model without a pinned commit can change under a running deployment: a new upload
    may change the tokenizer or the head and silently break the pairing that was validated."""
    found = []
    for field, model, revision, info in _models(ctx):
        if _is_local(model, info) or (revision and revision.lower() not in _UNPINNED):
            continue
        sha = f" (the cached snapshot is {info.revision})" if info and info.revision else ""
        found.append(
            at_field(
                field,
                Finding.warning(
                    what=f"{field}: {model} has no pinned revision",
                    why="a new upload to the repository can change the validated pairing",
                    fix=f"set {field.rsplit('.', 1)[0]}.revision to a commit sha{sha}",
                ),
            )
        )
    return found


@rule(
    "engine.trtllm-eagle-checkpoint",
    source="https://nvidia.github.io/TensorRT-LLM/1.2.0/features/speculative-decoding.html"
    "#usage-with-trtllm-bench-and-trtllm-serve (1.0-1.2: decoding_type Eagle is 'for EAGLE 3'); "
    "https://github.com/NVIDIA/TensorRT-LLM/blob/04c8822cc42ffd1f5b6270874e5b9a64a20e7a58/docs/"
    "source/features/speculative-decoding.md (1.3 on: Eagle is an alias of Eagle3 and EAGLE "
    "v1/v2 draft checkpoints are incompatible)",
    applies=lambda ctx: _eagle(ctx) and not ENGINES[ctx.engine].serves_eagle1_heads,
)
@_about("proposer.model")
def trtllm_eagle_checkpoint(ctx: CompatContext) -> Finding | None:
    """TensorRT-LLM's PyTorch backend serves EAGLE-3 heads only; `Eagle` is an alias converted to
    Eagle3, so an EAGLE-1/2 checkpoint cannot be served whichever method is written."""
    draft = ctx.draft
    if draft is None:
        return None
    if draft.eagle is None:
        return _not_a_head(ctx, draft)
    if draft.eagle.generation == "eagle3":
        return None
    return Finding.error(
        what=f"engine.name: trtllm with proposer.model {draft.ref}, an EAGLE-1/2 head",
        why="TensorRT-LLM loads only EAGLE-3 heads; this checkpoint is incompatible",
        fix="set proposer.model to an EAGLE-3 head for the target (proposer.method: eagle3), "
        "or set engine.name: vllm or sglang, which serve EAGLE-1 heads",
    )


# --- shared helpers ---------------------------------------------------------------------------


def _head(ctx: CompatContext) -> EagleHeadInfo | None:
    return ctx.draft.eagle if ctx.draft is not None else None


def _ref(ctx: CompatContext) -> str:
    return ctx.draft.ref if ctx.draft is not None else "(unresolved)"


def _not_a_head(ctx: CompatContext, draft: CheckpointInfo) -> Finding:
    layers = draft.num_hidden_layers
    if layers is not None and layers > 1:
        return Finding.error(
            what=f"proposer.method: {ctx.method} but proposer.model {draft.ref} is a "
            f"{layers}-layer language model with no EAGLE markers in config.json",
            why="the engine would build an EAGLE head from a full model: load fails",
            fix="set proposer.method: draft_model to use it as a draft LM, or set proposer.model "
            "to an EAGLE head trained for the target",
        )
    return cannot_check("proposer.model not recognised as an EAGLE head", draft, None)


def _models(ctx: CompatContext) -> list[tuple[str, str, str | None, CheckpointInfo | None]]:
    profile = ctx.profile
    models = [("target.model", profile.target.model, profile.target.revision, ctx.target)]
    if profile.proposer.model is not None:
        models.append(
            ("proposer.model", profile.proposer.model, profile.proposer.revision, ctx.draft)
        )
    return models


def _is_local(model: str, info: CheckpointInfo | None) -> bool:
    return (info is not None and info.source == "local") or looks_like_path(model)


RULES = (
    checkpoint_resolved,
    user_catalog_named,
    draft_tokenizer_matches,
    draft_vocab_size_matches,
    eagle_head_hidden_size_matches,
    eagle_head_vocab_matches,
    eagle_generation_matches,
    eagle_aux_layers_exist,
    speculators_format_is_read,
    speculators_verifier_matches,
    mtp_layers_declared,
    mtp_weights_present,
    revisions_pinned,
    trtllm_eagle_checkpoint,
)
