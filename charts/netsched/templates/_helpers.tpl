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

{{/* The --topology setting of every component: the levels as name=label,... when given, else the preset. */}}
{{- define "netsched.topology" -}}
{{- with .Values.topology.levels -}}
{{- $levels := list -}}
{{- range . }}{{ $levels = append $levels (printf "%s=%s" .name .label) }}{{ end -}}
{{- join "," $levels -}}
{{- else -}}
{{- .Values.topology.preset -}}
{{- end -}}
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
{{- include "netsched.tlsSecret" (dict "ctx" . "component" "extender" "tls" .Values.extender.tls) -}}
{{- end -}}

{{/* The extender's TLS material as JSON (netsched.servingTLS). */}}
{{- define "netsched.extenderTLS" -}}
{{- include "netsched.servingTLS" (dict "ctx" . "component" "extender" "tls" .Values.extender.tls) -}}
{{- end -}}

{{/* Mutual TLS on the extender's scheduling port: TLS on, and client certificates asked for. */}}
{{- define "netsched.extenderMutualTLS" -}}
{{- if and .Values.extender.tls.enabled .Values.extender.tls.clientAuth -}}true{{- end -}}
{{- end -}}

{{/* The Secret holding kube-scheduler's client certificate for the extender: the user's, or the chart's. */}}
{{- define "netsched.schedulerClientSecret" -}}
{{- .Values.extender.tls.clientSecretName | default (include "netsched.componentName" (dict "ctx" . "component" "scheduler-client-tls")) -}}
{{- end -}}

{{/*
kube-scheduler's client certificate for the extender as JSON: ca (the PEM the extender trusts for it)
and, when the chart makes it, cert and key. A CA of its own, not the serving certificate's: the extender
then takes no serving certificate for a client's. Made once per render (kept in .Release, as
netsched.servingTLS) and on an upgrade read back from the Secret (lookup), so it stays until the Secret
is deleted; the CA's private key is not kept: nothing is signed with it again.
*/}}
{{- define "netsched.schedulerClientTLS" -}}
{{- $root := . -}}
{{- if not (hasKey $root.Release "netschedTLS-scheduler-client") -}}
{{- $tls := .Values.extender.tls -}}
{{- $out := dict "ca" $tls.clientCABundle -}}
{{- if not $tls.clientSecretName -}}
{{- $old := lookup "v1" "Secret" $root.Release.Namespace (include "netsched.schedulerClientSecret" $root) | default dict -}}
{{- $data := dig "data" dict $old -}}
{{- if and (hasKey $data "tls.crt") (hasKey $data "tls.key") (hasKey $data "ca.crt") -}}
{{- $out = dict "ca" (b64dec (get $data "ca.crt")) "cert" (b64dec (get $data "tls.crt")) "key" (b64dec (get $data "tls.key")) -}}
{{- else -}}
{{- $name := include "netsched.componentName" (dict "ctx" $root "component" "scheduler") -}}
{{- $ca := genCA (printf "%s client CA" $name) 3650 -}}
{{- $cert := genSignedCert $name nil nil 3650 $ca -}}
{{- $out = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- end -}}
{{- $_ := set $out "ca" (printf "%s\n" (trim $out.ca)) -}}
{{- $_ := set $root.Release "netschedTLS-scheduler-client" $out -}}
{{- end -}}
{{- toJson (get $root.Release "netschedTLS-scheduler-client") -}}
{{- end -}}

{{/* The operator's admission webhook certificate: the extender's mechanism, for the operator's Service. */}}
{{- define "netsched.webhookTLSSecret" -}}
{{- include "netsched.tlsSecret" (dict "ctx" . "component" "operator" "tls" .Values.operator.webhook.tls) -}}
{{- end -}}

{{- define "netsched.webhookTLS" -}}
{{- include "netsched.servingTLS" (dict "ctx" . "component" "operator" "tls" .Values.operator.webhook.tls) -}}
{{- end -}}

{{/* Call with ctx, component and tls (its values: secretName, caBundle): the Secret holding the
component's certificate and key, the user's or <release>-<component>-tls that the chart makes. */}}
{{- define "netsched.tlsSecret" -}}
{{- .tls.secretName | default (include "netsched.componentName" (dict "ctx" .ctx "component" (printf "%s-tls" .component))) -}}
{{- end -}}

{{/*
A component's TLS material as JSON (call with ctx, component and tls): ca (the PEM its callers trust)
and, when the chart makes the certificate itself, cert and key, for the component's Service DNS names.
Worked out once per render and kept in .Release, which every template of the chart shares: the Secret
and the callers' configuration must carry the same CA, and genCA gives a new one at each call. On an
upgrade the Secret already in the cluster is reused (lookup), so the certificate stays and neither
the callers nor the component roll for it.
*/}}
{{- define "netsched.servingTLS" -}}
{{- $root := .ctx -}}
{{- $key := printf "netschedTLS-%s" .component -}}
{{- if not (hasKey $root.Release $key) -}}
{{- $tls := .tls -}}
{{- $out := dict "ca" $tls.caBundle -}}
{{- if not $tls.secretName -}}
{{- $name := include "netsched.tlsSecret" . -}}
{{- $old := lookup "v1" "Secret" $root.Release.Namespace $name | default dict -}}
{{- $data := dig "data" dict $old -}}
{{- if and (hasKey $data "tls.crt") (hasKey $data "tls.key") (hasKey $data "ca.crt") -}}
{{- $out = dict "ca" (b64dec (get $data "ca.crt")) "cert" (b64dec (get $data "tls.crt")) "key" (b64dec (get $data "tls.key")) -}}
{{- else -}}
{{- $svc := include "netsched.componentName" (dict "ctx" $root "component" .component) -}}
{{- $ns := $root.Release.Namespace -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $ca := genCA (printf "%s CA" $svc) 3650 -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $dns 3650 $ca -}}
{{- $out = dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- end -}}
{{- $_ := set $out "ca" (printf "%s\n" (trim $out.ca)) -}}
{{- $_ := set $root.Release $key $out -}}
{{- end -}}
{{- toJson (get $root.Release $key) -}}
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

{{/*
The upstream kube-scheduler's image. Its tag by default is the cluster's own version
(.Capabilities.KubeVersion without a vendor suffix such as +k3s1 or -eks-5e0fdde), so the second
scheduler never skews from the control plane. Below the chart's minimum (1.30) it is the version
netsched is tested with by default (KUBERNETES_DEFAULT of hack/controlplane/versions.env): `helm template` without --kube-version
reports v1.20.0, which would render an image too old for the scheduler configuration.
scheduler.image.tag overrides both.
*/}}
{{- define "netsched.schedulerImage" -}}
{{- $image := .Values.scheduler.image -}}
{{- $cluster := regexReplaceAll "[-+].*$" .Capabilities.KubeVersion.Version "" -}}
{{- $tag := ternary $cluster "v1.37.2" (semverCompare ">=1.30.0" $cluster) -}}
{{- printf "%s:%s" $image.repository ($image.tag | default $tag) -}}
{{- end -}}

{{/*
Plain-language checks of the values users set most, run before anything renders (templates/
values-check.yaml): the schema checks types and names, these say what a value is for and what it
takes. Decimals are checked here rather than in the schema because `--set x=0.5` hands the chart the
string "0.5" (helm reads only whole numbers as numbers there), which the schema's numeric bounds would
not see; the schema lets a numeric string through (definitions/decimal).
*/}}
{{- define "netsched.checkNumber" -}}
{{- $v := float64 .value -}}
{{- $rules := list -}}
{{- $bad := false -}}
{{- if hasKey . "above" -}}
{{- $rules = append $rules (printf "more than %v" .above) -}}
{{- $bad = or $bad (le $v (float64 .above)) -}}
{{- end -}}
{{- if hasKey . "atLeast" -}}
{{- $rules = append $rules (printf "at least %v" .atLeast) -}}
{{- $bad = or $bad (lt $v (float64 .atLeast)) -}}
{{- end -}}
{{- if hasKey . "below" -}}
{{- $rules = append $rules (printf "less than %v" .below) -}}
{{- $bad = or $bad (ge $v (float64 .below)) -}}
{{- end -}}
{{- if hasKey . "atMost" -}}
{{- $rules = append $rules (printf "at most %v" .atMost) -}}
{{- $bad = or $bad (gt $v (float64 .atMost)) -}}
{{- end -}}
{{- if $bad -}}
{{- fail (printf "%s is %v; it must be %s: %s" .name .value (join " and " $rules) .means) -}}
{{- end -}}
{{- end -}}

{{- define "netsched.checkValues" -}}
{{- $v := .Values -}}
{{- $numbers := list
  (dict "name" "operator.replicas" "value" $v.operator.replicas "atLeast" 1 "means" "how many operator pods run (one acts at a time)")
  (dict "name" "extender.replicas" "value" $v.extender.replicas "atLeast" 1 "means" "how many extender pods serve the scheduler")
  (dict "name" "scheduler.replicas" "value" $v.scheduler.replicas "atLeast" 1 "means" "how many netsched kube-scheduler pods run (one leads)")
  (dict "name" "operator.intervalSeconds" "value" $v.operator.intervalSeconds "above" 0 "means" "seconds between two reconciles of a GPUJob, e.g. 0.5")
  (dict "name" "operator.forecastIntervalSeconds" "value" $v.operator.forecastIntervalSeconds "above" 0 "means" "seconds between two forecasts of start and finish times")
  (dict "name" "operator.neverFitsTimeout" "value" $v.operator.neverFitsTimeout "atLeast" 0 "means" "seconds a job that could never fit stays Blocked before it fails; 0: no limit")
  (dict "name" "operator.leaseDurationSeconds" "value" $v.operator.leaseDurationSeconds "atLeast" 2 "means" "seconds after which a leader that has not renewed its Lease is replaced")
  (dict "name" "operator.packer.budgetSeconds" "value" $v.operator.packer.budgetSeconds "above" 0 "atMost" 60 "means" "seconds each packer solve may take, e.g. 0.5")
  (dict "name" "operator.packer.waitSeconds" "value" $v.operator.packer.waitSeconds "atLeast" 0 "means" "seconds a pod waits before the packer looks")
  (dict "name" "operator.packer.cooldownSeconds" "value" $v.operator.packer.cooldownSeconds "atLeast" 0 "means" "least seconds between two packer solves")
  (dict "name" "operator.packer.planDeadlineSeconds" "value" $v.operator.packer.planDeadlineSeconds "atLeast" 5 "atMost" 3600 "means" "seconds a PackingPlan may take before it is abandoned (the PackingPlan CRD's range)")
  (dict "name" "extender.maxCacheAge" "value" $v.extender.maxCacheAge "above" 0 "means" "seconds: the oldest node and pod cache the extender answers from")
  (dict "name" "extender.holdSeconds" "value" $v.extender.holdSeconds "above" 0 "means" "seconds a job's first node keeps its room for the job's other replicas")
  (dict "name" "extender.telemetry.maxAgeSeconds" "value" $v.extender.telemetry.maxAgeSeconds "above" 0 "means" "seconds after which a link measurement is unknown")
  (dict "name" "extender.model.reloadSeconds" "value" $v.extender.model.reloadSeconds "above" 0 "means" "seconds between checks for a new model")
  (dict "name" "retrain.holdout" "value" $v.retrain.holdout "above" 0 "below" 1 "means" "the share of the most recent jobs both models are judged on, e.g. 0.2")
  (dict "name" "retrain.threads" "value" $v.retrain.threads "atLeast" 1 "means" "threads the retrain fits may use, e.g. 1")
  (dict "name" "agent.interval" "value" $v.agent.interval "above" 0 "means" "seconds between two probe rounds")
  (dict "name" "agent.port" "value" $v.agent.port "atLeast" 1 "atMost" 65535 "means" "a TCP port on every node")
  (dict "name" "agent.probePort" "value" $v.agent.probePort "atLeast" 1 "atMost" 65535 "means" "a TCP port on every node")
}}
{{- with $v.operator.packer.policy.pointsPerMinute }}
{{- $numbers = append $numbers (dict "name" "operator.packer.policy.pointsPerMinute" "value" . "atLeast" 0 "means" "points each minute of run time a restart throws away costs") }}
{{- end }}
{{- range $product, $entry := $v.gpuCapabilities }}
{{- range $field, $number := $entry }}
{{- $numbers = append $numbers (dict "name" (printf "gpuCapabilities.%s.%s" $product $field) "value" $number "above" 0 "means" "a GPU's capability figure") }}
{{- end }}
{{- end }}
{{- range $numbers }}
{{- include "netsched.checkNumber" . }}
{{- end }}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" (toString $v.scheduler.extender.httpTimeout)) }}
{{- fail (printf "scheduler.extender.httpTimeout is %q; it must be a Go duration such as 2s, 500ms or 1m30s: the longest wait for one extender call" (toString $v.scheduler.extender.httpTimeout)) }}
{{- end }}
{{- $seen := dict }}
{{- range $i, $level := $v.topology.levels }}
{{- if has $level.name (list "node" "far" "endpoint") }}
{{- fail (printf "topology.levels[%d].name is %q; it must not be node, far or endpoint: those mean something else in maxPeerDistance and data sources" $i $level.name) }}
{{- end }}
{{- range $key := list "name" "label" }}
{{- $seenAs := printf "%s=%s" $key (get $level $key) }}
{{- if hasKey $seen $seenAs }}
{{- fail (printf "topology.levels[%d].%s is %q, as is topology.levels[%s].%s; each level needs its own" $i $key (get $level $key) (get $seen $seenAs) $key) }}
{{- end }}
{{- $_ := set $seen $seenAs (toString $i) }}
{{- end }}
{{- end }}
{{- /* Strings that must not be empty, and what goes with what: said here in the value's words (the schema
would say "minLength: got 0" or "'oneOf' failed") */}}
{{- $strings := list
  (dict "name" "image.repository" "value" $v.image.repository "why" "the registry and name of the netsched image, e.g. registry.example.com/netsched")
  (dict "name" "scheduler.image.repository" "value" $v.scheduler.image.repository "why" "the kube-scheduler image, e.g. registry.k8s.io/kube-scheduler")
  (dict "name" "prometheusRule.runbookUrl" "value" $v.prometheusRule.runbookUrl "why" "the address where your team reads docs/runbook.md, e.g. https://git.example.com/netsched/blob/main/docs/runbook.md")
}}
{{- range $strings }}
{{- if not .value }}
{{- fail (printf "%s is empty; set it to %s" .name .why) }}
{{- end }}
{{- end }}
{{- if and $v.prometheusRule.enabled (not (regexMatch "^https?://[^\\s]+$" $v.prometheusRule.runbookUrl)) }}
{{- fail (printf "prometheusRule.runbookUrl is %q; it must be an absolute http(s) URL, since alert receivers open it outside the repository, e.g. https://git.example.com/netsched/blob/main/docs/runbook.md" $v.prometheusRule.runbookUrl) }}
{{- end }}
{{- range $i, $secret := $v.imagePullSecrets }}
{{- if not $secret.name }}
{{- fail (printf "imagePullSecrets[%d].name is empty; name a Secret of type kubernetes.io/dockerconfigjson in the release namespace, or remove the entry" $i) }}
{{- end }}
{{- end }}
{{- range $i, $class := $v.operator.packer.policy.classes }}
{{- $has := list (hasKey $class "priorityClassName") (hasKey $class "priority") }}
{{- if and (hasKey $class "priorityClassName") (not $class.priorityClassName) }}
{{- fail (printf "operator.packer.policy.classes[%d].priorityClassName is empty; name a PriorityClass, or give priority (a number) instead" $i) }}
{{- end }}
{{- if eq (has true $has) false }}
{{- fail (printf "operator.packer.policy.classes[%d] names no class; give priorityClassName (e.g. high) or priority (e.g. 1000): which pods the rule is for" $i) }}
{{- end }}
{{- if and (hasKey $class "priorityClassName") (hasKey $class "priority") }}
{{- fail (printf "operator.packer.policy.classes[%d] gives both priorityClassName and priority; give one: which pods the rule is for" $i) }}
{{- end }}
{{- end }}
{{- with $v.extender.tls }}
{{- if and .enabled .secretName (not .caBundle) }}
{{- fail (printf "extender.tls.secretName is %q but extender.tls.caBundle is empty; set caBundle to the PEM certificate of the CA that signed the Secret's certificate (kube-scheduler verifies the extender with it)" .secretName) }}
{{- end }}
{{- if and .enabled .clientAuth .clientSecretName (not .clientCABundle) }}
{{- fail (printf "extender.tls.clientSecretName is %q but extender.tls.clientCABundle is empty; set clientCABundle to the PEM certificate of the CA that signed the client certificate (the extender verifies kube-scheduler with it)" .clientSecretName) }}
{{- end }}
{{- end }}
{{- with $v.operator.webhook.tls }}
{{- if and .secretName (not .caBundle) }}
{{- fail (printf "operator.webhook.tls.secretName is %q but operator.webhook.tls.caBundle is empty; set caBundle to the PEM certificate of the CA that signed the Secret's certificate (the API server verifies the webhook with it)" .secretName) }}
{{- end }}
{{- end }}
{{- if and (eq $v.extender.model.source "pvc") (or (not $v.extender.model.claimName) (not $v.extender.model.path)) }}
{{- fail (printf "extender.model.source is pvc but extender.model.%s is empty; name the PersistentVolumeClaim holding the model (claimName) and the model's path in it (path), or set source: image" (ternary "claimName" "path" (not $v.extender.model.claimName))) }}
{{- end }}
{{- range $name, $tag := dict "image.tag" $v.image.tag "scheduler.image.tag" $v.scheduler.image.tag }}
{{- if not (regexMatch "^([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$" (toString $tag)) }}
{{- fail (printf "%s is %q; it must be an image tag alone (letters, digits, '.', '_', '-'; the repository goes in %s), such as %s, or empty for the default" $name (toString $tag) (replace ".tag" ".repository" $name) (ternary "v1.31.4" "0.1.0" (hasPrefix "scheduler" $name))) }}
{{- end }}
{{- end }}
{{- end -}}
