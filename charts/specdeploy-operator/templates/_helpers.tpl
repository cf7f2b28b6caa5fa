{{- define "specdeploy-operator.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "specdeploy-operator.serviceAccount" -}}
{{- default (include "specdeploy-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "specdeploy-operator.labels" -}}
app.kubernetes.io/name: specdeploy-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "specdeploy-operator.namespaces" -}}
{{- if .Values.watchNamespaces -}}{{ toJson .Values.watchNamespaces }}{{- else -}}{{ toJson (list .Release.Namespace) }}{{- end -}}
{{- end -}}

{{/* The rules the operator uses, and no more (orchestrator/operator/rbac.py RULES; a test
keeps them equal). */}}
{{- define "specdeploy-operator.rules" -}}
- apiGroups: [specdeploy.io]
  resources: [speculativedeployments]
  verbs: [get, list, watch, patch]
- apiGroups: [specdeploy.io]
  resources: [speculativedeployments/status]
  verbs: [patch]
- apiGroups: [specdeploy.io]
  resources: [speculativedeployments/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
- apiGroups: [""]
  resources: [services, configmaps, persistentvolumeclaims]
  verbs: [get, create, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, create, patch, delete]
- apiGroups: [leaderworkerset.x-k8s.io]
  resources: [leaderworkersets]
  verbs: [get, create, patch, delete]
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, create, patch, delete]
{{- end -}}

{{/* The Lease rules (orchestrator/operator/rbac.py LEADER_RULES). */}}
{{- define "specdeploy-operator.leaderRules" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
