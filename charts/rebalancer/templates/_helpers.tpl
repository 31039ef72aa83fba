{{/* The chart's name, or nameOverride. */}}
{{- define "rebalancer.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name of the release's objects: fullnameOverride, else the release name when it
already holds the chart's name, else release-name. */}}
{{- define "rebalancer.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "rebalancer.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* CronJob or Deployment: `kind`, or the old `mode` (cronjob|deployment) when set. */}}
{{- define "rebalancer.kind" -}}
{{- if .Values.mode -}}
{{- if eq (toString .Values.mode) "deployment" }}Deployment{{ else }}CronJob{{ end -}}
{{- else -}}
{{- .Values.kind -}}
{{- end -}}
{{- end -}}

{{/* client, server or none; the descheduler's true and false mean client and none. steerOnly
is none (its policy evicts nothing); the descheduler's cmdOptions.dry-run wins over dryRun. */}}
{{- define "rebalancer.dryRun" -}}
{{- $cmd := .Values.cmdOptions | default dict -}}
{{- if .Values.steerOnly -}}
none
{{- else if hasKey $cmd "dry-run" -}}
{{- if eq (index $cmd "dry-run" | toString) "false" }}none{{ else }}client{{ end -}}
{{- else if kindIs "bool" .Values.dryRun -}}
{{- if .Values.dryRun }}client{{ else }}none{{ end -}}
{{- else -}}
{{- .Values.dryRun -}}
{{- end -}}
{{- end -}}

{{/* The CronJob's schedule: `schedule`, or the old `cronjob.schedule` when set. */}}
{{- define "rebalancer.schedule" -}}
{{- (.Values.cronjob).schedule | default .Values.schedule -}}
{{- end -}}

{{/* The Deployment's interval: `deschedulingInterval`, or the old `deployment.interval`. */}}
{{- define "rebalancer.interval" -}}
{{- (.Values.deployment).interval | default .Values.deschedulingInterval -}}
{{- end -}}

{{- define "rebalancer.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rebalancer.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rebalancer.labels" -}}
{{ include "rebalancer.selectorLabels" . }}
app.kubernetes.io/part-of: rebalancer
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Lease's name: the descheduler's leaderElection.resourceName, else lease.name. */}}
{{- define "rebalancer.leaseName" -}}
{{- (.Values.leaderElection).resourceName | default .Values.lease.name -}}
{{- end -}}

{{/* The Lease's namespace: leaderElection.resourceNamespace (or its misspelt twin), else the
release namespace. */}}
{{- define "rebalancer.leaseNamespace" -}}
{{- $le := .Values.leaderElection | default dict -}}
{{- $le.resourceNamespace | default $le.resourceNamescape | default .Release.Namespace -}}
{{- end -}}

{{/* The policy as run: policy, with steerOnly's steerScaleDown true and limits.total 0. */}}
{{- define "rebalancer.policy" -}}
{{- $policy := deepCopy (.Values.policy | default dict) -}}
{{- if .Values.steerOnly -}}
{{- $_ := set $policy "steerScaleDown" true -}}
{{- $limits := deepCopy ($policy.limits | default dict) -}}
{{- $_ := set $limits "total" 0 -}}
{{- $_ := set $policy "limits" $limits -}}
{{- end -}}
{{- toYaml $policy -}}
{{- end -}}

{{/* The value of one CronJob field: the descheduler's top-level name when set, else cronjob.*. */}}
{{- define "rebalancer.cronField" -}}
{{- $top := index .root.Values .name -}}
{{- if kindIs "invalid" $top -}}
{{- index .root.Values.cronjob .name -}}
{{- else -}}
{{- $top -}}
{{- end -}}
{{- end -}}

{{- define "rebalancer.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rebalancer.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rebalancer.policyConfigMap" -}}
{{- printf "%s-policy" (include "rebalancer.fullname" .) -}}
{{- end -}}

{{/* The arguments of `rebalancer run`, one per line of a YAML list. */}}
{{- define "rebalancer.args" -}}
{{- $dryRun := include "rebalancer.dryRun" . }}
{{- $kind := include "rebalancer.kind" . }}
- run
{{- if eq $dryRun "client" }}
- --dry-run
{{- else if eq $dryRun "server" }}
- --server-dry-run
{{- end }}
{{- if eq $kind "Deployment" }}
- --interval
- {{ include "rebalancer.interval" . | quote }}
{{- end }}
- --policy
- /etc/rebalancer/policy.yaml
{{- if ne .Values.output "table" }}
- --output
- {{ .Values.output }}
{{- end }}
{{- if eq $kind "Deployment" }}
- --metrics-bind-address
- {{ printf "0.0.0.0:%d" (int .Values.deployment.metricsPort) | quote }}
{{- end }}
{{- with .Values.pushgateway.url }}
- --pushgateway
- {{ . | quote }}
{{- end }}
{{- if ne (include "rebalancer.leaseName" .) "rebalancer" }}
- --lease-name
- {{ include "rebalancer.leaseName" . | quote }}
{{- end }}
{{- with (.Values.leaderElection).leaseDuration }}
- --lease-duration
- {{ . | quote }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end -}}

{{/* The pod spec shared by the CronJob's jobs and the Deployment. */}}
{{- define "rebalancer.podSpec" -}}
serviceAccountName: {{ include "rebalancer.serviceAccountName" . }}
{{- if eq (include "rebalancer.kind" .) "CronJob" }}
restartPolicy: Never
{{- end }}
terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.schedulerName }}
schedulerName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
containers:
  - name: rebalancer
    {{- $image := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
    {{- if .Values.image.digest }}{{ $image = printf "%s@%s" $image .Values.image.digest }}{{ end }}
    image: {{ $image | quote }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    args:
      {{- include "rebalancer.args" . | nindent 6 }}
    env:
      - name: POD_NAME  # reportingInstance of the Events
        valueFrom:
          fieldRef:
            fieldPath: metadata.name
      - name: REBALANCER_LEASE_NAMESPACE  # the Lease lives where the Role grants it
        {{- $le := .Values.leaderElection | default dict }}
        {{- with $le.resourceNamespace | default $le.resourceNamescape }}
        value: {{ . | quote }}
        {{- else }}
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace
        {{- end }}
    {{- if eq (include "rebalancer.kind" .) "Deployment" }}
    ports:
      - name: metrics
        containerPort: {{ .Values.deployment.metricsPort }}
    readinessProbe:
      httpGet:
        path: /metrics
        port: metrics
    {{- with .Values.livenessProbe }}
    livenessProbe:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- end }}
    resources:
      {{- toYaml .Values.resources | nindent 6 }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    volumeMounts:
      - name: policy
        mountPath: /etc/rebalancer
        readOnly: true
volumes:
  - name: policy
    configMap:
      name: {{ include "rebalancer.policyConfigMap" . }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "rebalancer.podMetadata" -}}
labels:
  {{- include "rebalancer.selectorLabels" . | nindent 2 }}
  {{- with .Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  # A changed policy rolls the Deployment's pod, like kustomize's hashed ConfigMap name.
  checksum/policy: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
  {{- with .Values.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}
