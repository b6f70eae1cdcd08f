{{/*
Names and labels. Objects are named <fullname>-<component>; fullname is the release name
when it already contains "netsched" (so `helm install netsched` gives netsched-extender).
*/}}
{{- define "netsched.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* <fullname>-<component>; call with (dict "ctx" $ "component" "extender"). */}}
{{- define "netsched.componentName" -}}
{{- printf "%s-%s" (include "netsched.fullname" .ctx) .component -}}
{{- end -}}

{{- define "netsched.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "netsched.labels" -}}
{{ include "netsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: netsched
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end -}}

{{/* name, namespace and labels of one component's object. */}}
{{- define "netsched.metadata" -}}
name: {{ include "netsched.componentName" . }}
namespace: {{ .ctx.Release.Namespace }}
labels:
  {{- include "netsched.labels" . | nindent 2 }}
{{- end -}}

{{- define "netsched.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The -train image (Dockerfile target `train`): the serving image has no scikit-learn. */}}
{{- define "netsched.trainImage" -}}
{{- printf "%s-train" (include "netsched.image" .) -}}
{{- end -}}

{{/* The extender Service's in-cluster URL, the scheduler's urlPrefix. */}}
{{- define "netsched.extenderURL" -}}
{{- printf "http://%s.%s.svc:8888" (include "netsched.componentName" (dict "ctx" . "component" "extender")) .Release.Namespace -}}
{{- end -}}

{{/* Pod-level settings shared by every component; call with the component's values as .values. */}}
{{- define "netsched.podSpec" -}}
serviceAccountName: {{ include "netsched.componentName" . }}
{{- with .ctx.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "netsched.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end -}}
