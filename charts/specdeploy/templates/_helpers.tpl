{{/* The engine container's probes on the named port "http" (values.pod.probes). */}}
{{- define "specdeploy.probe" -}}
httpGet: {path: {{ toJson .path }}, port: http}
periodSeconds: {{ toJson .periodSeconds }}
timeoutSeconds: {{ toJson .timeoutSeconds }}
failureThreshold: {{ toJson .failureThreshold }}
{{- end }}

{{/* Pod spec fields shared by Deployment pods, LWS leaders and LWS workers. */}}
{{- define "specdeploy.podPlacement" -}}
nodeSelector: {{ toJson .nodeSelector }}
tolerations: {{ toJson .tolerations }}
volumes: {{ toJson .volumes }}
initContainers: {{ toJson .initContainers }}
{{- end }}
