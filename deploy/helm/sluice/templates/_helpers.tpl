{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: worker
{{- end }}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the worker's secrets come from: the operator's or the chart's. */}}
{{- define "sluice.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if .Values.secret.create }}
{{- include "sluice.fullname" . }}
{{- end }}
{{- end }}

{{/*
The environment variables read from the Secret, by the key of the same name.
NATS_PASSWORD is not the worker's: SLUICE_NATS_URL refers to it.
*/}}
{{- define "sluice.secretEnv" -}}
{{- list "SLUICE_MEDIA_API_KEY" "SLUICE_COMPUTE_PASSWORD" "SLUICE_COMPUTE_ACCESS_KEY" "SLUICE_COMPUTE_SECRET_KEY" "SLUICE_CONSOLE_TOKEN" "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY" "NATS_PASSWORD" | toJson }}
{{- end }}

{{/* SLUICE_NATS_URL: each server, with nats.user and $(NATS_PASSWORD) when a user is set. */}}
{{- define "sluice.natsURL" -}}
{{- $user := .Values.nats.user }}
{{- $urls := list }}
{{- range .Values.nats.urls }}
{{- if $user }}
{{- $u := urlParse . }}
{{- $urls = append $urls (printf "%s://%s:$(NATS_PASSWORD)@%s" $u.scheme $user $u.host) }}
{{- else }}
{{- $urls = append $urls . }}
{{- end }}
{{- end }}
{{- join "," $urls }}
{{- end }}

{{/*
The model catalog file (modelCatalog, docs/job-spec.md#the-model-catalog):
the JSON text as given, so that the worker's errors name its lines, or an
object written as JSON; empty without one. Text that is not a JSON object
fails the render here rather than every worker at start.
*/}}
{{- define "sluice.modelCatalog" -}}
{{- $c := .Values.modelCatalog }}
{{- if $c }}
{{- $text := $c }}
{{- if not (kindIs "string" $c) }}
{{- $text = printf "%s\n" (toPrettyJson $c) }}
{{- end }}
{{- $parsed := fromJson $text }}
{{- if hasKey $parsed "Error" }}
{{- fail (printf "modelCatalog: not a JSON object: %s" (get $parsed "Error")) }}
{{- end }}
{{- $text }}
{{- end }}
{{- end }}
