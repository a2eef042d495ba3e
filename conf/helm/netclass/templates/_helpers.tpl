{{/* The namespace of the workloads: .Values.namespace, else the release's. */}}
{{- define "netclass.namespace" -}}
{{ .Values.namespace | default .Release.Namespace }}
{{- end }}

{{/* The image of both workloads. */}}
{{- define "netclass.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end }}

{{/* Environment that points a workload at the API server, when apiServer says where. */}}
{{- define "netclass.apiServerEnv" -}}
{{- with .Values.apiServer.host }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ . | quote }}
{{- end }}
{{- with .Values.apiServer.port }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ . | quote }}
{{- end }}
{{- end }}
