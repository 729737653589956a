{{/* Names are cut to 63 characters: the limit of a DNS label. */}}
{{- define "rutomq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rutomq.fullname" -}}
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

{{- define "rutomq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels never change after install: a Deployment's selector is immutable. */}}
{{- define "rutomq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rutomq.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rutomq.labels" -}}
helm.sh/chart: {{ include "rutomq.chart" . }}
{{ include "rutomq.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "rutomq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rutomq.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "rutomq.secretName" -}}
{{- default (include "rutomq.fullname" .) .Values.existingSecret }}
{{- end }}

{{- define "rutomq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Settings without which agents start but never form a working cluster are
refused at render time, where the message is clear, instead of in a crash
loop.
*/}}
{{- define "rutomq.validate" -}}
{{- if not .Values.objectStore }}
{{- fail "objectStore is required: s3://bucket/prefix, shared by every agent of the release" }}
{{- end }}
{{- if and (not .Values.existingSecret) (not .Values.postgresUrl) }}
{{- fail "postgresUrl is required (or existingSecret with RUTOMQ_POSTGRES_URL): without it each agent would run a private PostgreSQL and no two would agree" }}
{{- end }}
{{- $secret := list "RUTOMQ_POSTGRES_URL" "RUTOMQ_S3_ACCESS_KEY_ID" "RUTOMQ_S3_SECRET_ACCESS_KEY" "RUTOMQ_DELEGATION_TOKEN_SECRET_KEY" }}
{{- $owned := list "RUTOMQ_OBJECT_STORE" "RUTOMQ_S3_ENDPOINT" "RUTOMQ_S3_REGION" "RUTOMQ_S3_ALLOW_HTTP" "RUTOMQ_SHARDS" "RUTOMQ_DATA_DIR" "RUTOMQ_LISTEN" "RUTOMQ_HTTP" "RUTOMQ_ADVERTISE" }}
{{- range $k, $_ := .Values.config }}
{{- if has $k $secret }}
{{- fail (printf "config.%s: a secret does not belong in a ConfigMap; use postgresUrl and s3 keys, or existingSecret" $k) }}
{{- else if has $k $owned }}
{{- fail (printf "config.%s is set by the chart: use objectStore, s3, shards or ports" $k) }}
{{- else if has $k (list "RUTOMQ_LISTENERS" "RUTOMQ_ADVERTISED_LISTENERS") }}
{{- fail (printf "config.%s: the chart serves one PLAINTEXT listener on the pod IP; named listeners are not templated" $k) }}
{{- end }}
{{- end }}
{{- if ne (empty .Values.s3.accessKeyId) (empty .Values.s3.secretAccessKey) }}
{{- fail "s3.accessKeyId and s3.secretAccessKey go together" }}
{{- end }}
{{- end }}
