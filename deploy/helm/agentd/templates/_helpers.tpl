{{/* Names and labels shared by every template. */}}
{{- define "agentd.name" -}}{{ .Release.Name }}{{- end -}}

{{- define "agentd.labels" -}}
app.kubernetes.io/part-of: agentd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "agentd.image" -}}{{ .Values.image.repository }}:{{ .Values.image.tag }}{{- end -}}

{{- define "agentd.redisSecret" -}}
{{- default (printf "%s-redis" .Release.Name) .Values.redis.existingSecret -}}
{{- end -}}
{{- define "agentd.authSecret" -}}
{{- default (printf "%s-auth" .Release.Name) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "agentd.redisUrl" -}}
{{- if eq .Values.redis.mode "bundled" -}}
redis://agentd@{{ .Release.Name }}-redis:6379
{{- else -}}
{{- required "redis.external.url is required when redis.mode is external" .Values.redis.external.url -}}
{{- end -}}
{{- end -}}

{{/* The environment every server and worker shares: the log, its password, the stores. */}}
{{- define "agentd.commonEnv" -}}
- name: AGENTD_EVENT_LOG
  value: {{ include "agentd.redisUrl" . | quote }}
- name: AGENTD_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "agentd.redisSecret" . }}
      key: password
{{- if .Values.redis.external.tlsCaSecret }}
- name: AGENTD_REDIS_TLS_CA
  value: /etc/agentd/redis-ca/ca.crt
{{- end }}
- name: AGENTD_ARTIFACT_STORE
  value: redis
- name: AGENTD_AUTH_FILE
  value: /etc/agentd/auth/auth.yaml
- name: AGENTD_POLICY
  value: /etc/agentd/policy/policy.yaml
{{- end -}}

{{- define "agentd.commonMounts" -}}
- name: auth
  mountPath: /etc/agentd/auth
  readOnly: true
- name: policy
  mountPath: /etc/agentd/policy
  readOnly: true
{{- if .Values.redis.external.tlsCaSecret }}
- name: redis-ca
  mountPath: /etc/agentd/redis-ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "agentd.commonVolumes" -}}
- name: auth
  secret:
    secretName: {{ include "agentd.authSecret" . }}
- name: policy
  configMap:
    name: {{ .Release.Name }}-policy
{{- if .Values.redis.external.tlsCaSecret }}
- name: redis-ca
  secret:
    secretName: {{ .Values.redis.external.tlsCaSecret }}
{{- end }}
{{- end -}}

{{/* Restricted-level security for agentd's own containers. */}}
{{- define "agentd.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
seccompProfile:
  type: RuntimeDefault
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "agentd.spread" -}}
{{- if .root.Values.topologySpread.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ .root.Values.topologySpread.maxSkew }}
    topologyKey: {{ .root.Values.topologySpread.topologyKey }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app.kubernetes.io/name: {{ .name }}
        app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end }}
{{- end -}}
