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
{{- $scheme := ternary "https" "http" .Values.extender.tls.enabled -}}
{{- printf "%s://%s.%s.svc:8888" $scheme (include "netsched.componentName" (dict "ctx" . "component" "extender")) .Release.Namespace -}}
{{- end -}}

{{/* The name of the extender's port: https when it serves TLS (service meshes go by the name). */}}
{{- define "netsched.extenderPort" -}}
{{- ternary "https" "http" .Values.extender.tls.enabled -}}
{{- end -}}

{{/* The Secret holding the extender's certificate and key: the user's, or the one the chart makes. */}}
{{- define "netsched.extenderTLSSecret" -}}
{{- .Values.extender.tls.secretName | default (include "netsched.componentName" (dict "ctx" . "component" "extender-tls")) -}}
{{- end -}}

{{/*
The extender's TLS material as JSON: ca (the PEM the scheduler trusts) and, when the chart makes the
certificate itself, cert and key. Worked out once per render and kept in .Release, which every
template of the chart shares: the Secret and the scheduler's configuration must carry the same CA,
and genCA gives a new one at each call. On an upgrade the Secret already in the cluster is reused
(lookup), so the certificate stays and neither the scheduler nor the extender rolls for it.
*/}}
{{- define "netsched.extenderTLS" -}}
{{- if not (hasKey .Release "netschedExtenderTLS") -}}
{{- $tls := .Values.extender.tls -}}
{{- $out := dict "ca" $tls.caBundle -}}
{{- if not $tls.secretName -}}
{{- $name := include "netsched.extenderTLSSecret" . -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace $name | default dict -}}
{{- $data := dig "data" dict $old -}}
{{- if and (hasKey $data "tls.crt") (hasKey $data "tls.key") (hasKey $data "ca.crt") -}}
{{- $out = dict "ca" (b64dec (get $data "ca.crt")) "cert" (b64dec (get $data "tls.crt")) "key" (b64dec (get $data "tls.key")) -}}
{{- else -}}
{{- $svc := include "netsched.componentName" (dict "ctx" . "component" "extender") -}}
{{- $ns := .Release.Namespace -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $ca := genCA (printf "%s CA" $svc) 3650 -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns 3650 $ca -}}
{{- $out = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- end -}}
{{- $_ := set $out "ca" (printf "%s\n" (trim $out.ca)) -}}
{{- $_ := set .Release "netschedExtenderTLS" $out -}}
{{- end -}}
{{- toJson (get .Release "netschedExtenderTLS") -}}
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
