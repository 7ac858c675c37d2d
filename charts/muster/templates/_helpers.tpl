{{/* Name of the release's objects. */}}
{{- define "muster.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "muster.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "muster.labels" -}}
{{ include "muster.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "muster.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "muster.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "muster.webhookService" -}}
{{- printf "%s-webhook" (include "muster.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Where the webhook's serving certificate comes from: controller, helm or
cert-manager. The deprecated webhook.certManager.enabled=true still means
cert-manager.
*/}}
{{- define "muster.webhookCerts" -}}
{{- if dig "enabled" false .Values.webhook.certManager -}}
cert-manager
{{- else -}}
{{- .Values.webhook.certs -}}
{{- end -}}
{{- end -}}

{{- define "muster.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "muster.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The webhook's serving certificate when Helm makes it (cert-manager off), as
YAML with ca.crt, tls.crt and tls.key: the existing Secret's on upgrade, else a
new CA and a certificate it signed for the webhook Service. Made once per
render, so the Secret, the caBundle and the pod checksum agree.
*/}}
{{- define "muster.webhookCert" -}}
{{- if not (hasKey $ "musterWebhookCert") -}}
{{- $svc := include "muster.webhookService" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "muster.webhookSecret" .) -}}
{{- $cert := dict -}}
{{- if and $existing (hasKey (default dict $existing.data) "ca.crt") -}}
{{- $cert = dict "ca.crt" (index $existing.data "ca.crt" | b64dec) "tls.crt" (index $existing.data "tls.crt" | b64dec) "tls.key" (index $existing.data "tls.key" | b64dec) -}}
{{- else -}}
{{- $days := int .Values.webhook.certValidityDays -}}
{{- $ca := genCA (printf "%s-ca" $svc) $days -}}
{{- $names := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- $leaf := genSignedCert (printf "%s.%s.svc" $svc .Release.Namespace) nil $names $days $ca -}}
{{- $cert = dict "ca.crt" $ca.Cert "tls.crt" $leaf.Cert "tls.key" $leaf.Key -}}
{{- end -}}
{{- $_ := set $ "musterWebhookCert" $cert -}}
{{- end -}}
{{- toYaml (get $ "musterWebhookCert") -}}
{{- end -}}

{{/*
Namespaces no webhook is sent from: the cluster's own (kube-system,
kube-public, kube-node-lease; the API server labels every namespace with
kubernetes.io/metadata.name), so that an unavailable webhook never blocks
the system.
*/}}
{{- define "muster.webhookNamespaces" -}}
- key: kubernetes.io/metadata.name
  operator: NotIn
  values: ["kube-system", "kube-public", "kube-node-lease"]
{{- end }}
