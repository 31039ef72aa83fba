{{/* Seconds in a Go-style duration made of whole h, m and s parts (10m, 1h30m, 90s). */}}
{{- define "rebalancer.durationSeconds" -}}
{{- $text := toString . -}}
{{- if not (regexMatch "^([0-9]+[hms])+$" $text) -}}
{{- fail (printf "cannot read %q as a duration of whole hours, minutes and seconds (e.g. 15m, 1h30m)" $text) -}}
{{- end -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+[hms]" $text -1 -}}
{{- $n := int (trimSuffix "h" (trimSuffix "m" (trimSuffix "s" .))) -}}
{{- $unit := get (dict "h" 3600 "m" 60 "s" 1) (substr (int (sub (len .) 1)) (len .) .) -}}
{{- $total = add $total (mul $n $unit) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Seconds as a Prometheus duration: 1800 -> 30m, 2250 -> 37m30s, 5400 -> 1h30m. */}}
{{- define "rebalancer.promDuration" -}}
{{- $s := int . -}}
{{- $h := div $s 3600 -}}
{{- $m := div (mod $s 3600) 60 -}}
{{- $r := mod $s 60 -}}
{{- if $h }}{{ $h }}h{{ end }}{{ if $m }}{{ $m }}m{{ end }}{{ if or $r (eq $s 0) }}{{ $r }}s{{ end -}}
{{- end -}}

{{/* The time from one run's start to the next, in seconds, that the alerts' windows follow:
prometheusRule.runPeriod when set; else, kind Deployment, the interval; kind CronJob, the
period of the schedule when it has one (every N minutes, hourly at a minute, every N hours or
daily at a time); any other schedule needs prometheusRule.runPeriod. */}}
{{- define "rebalancer.runPeriodSeconds" -}}
{{- $kind := include "rebalancer.kind" . -}}
{{- if .Values.prometheusRule.runPeriod -}}
{{- include "rebalancer.durationSeconds" .Values.prometheusRule.runPeriod -}}
{{- else if eq $kind "Deployment" -}}
{{- include "rebalancer.durationSeconds" (include "rebalancer.interval" .) -}}
{{- else -}}
{{- $schedule := include "rebalancer.schedule" . | trim -}}
{{- $cron := regexReplaceAll "^(CRON_)?TZ=\\S+\\s+" $schedule "" -}}
{{- $descriptors := dict "@hourly" 3600 "@daily" 86400 "@midnight" 86400 "@weekly" 604800 -}}
{{- $fields := splitList " " (regexReplaceAll "\\s+" $cron " ") -}}
{{- $period := 0 -}}
{{- if hasKey $descriptors $cron -}}
{{- $period = get $descriptors $cron -}}
{{- else if hasPrefix "@every " $cron -}}
{{- $period = include "rebalancer.durationSeconds" (trimPrefix "@every " $cron) | int -}}
{{- else if and (eq (len $fields) 5) (eq (join " " (slice $fields 2)) "* * *") -}}
{{- $minute := index $fields 0 -}}
{{- $hour := index $fields 1 -}}
{{- if eq $hour "*" -}}
{{- if eq $minute "*" -}}
{{- $period = 60 -}}
{{- else if regexMatch "^\\*/[0-9]+$" $minute -}}
{{- $step := int (trimPrefix "*/" $minute) -}}
{{- if and (gt $step 0) (eq (mod 60 $step) 0) -}}
{{- $period = mul 60 $step -}}
{{- end -}}
{{- else if regexMatch "^[0-9]+$" $minute -}}
{{- $period = 3600 -}}
{{- end -}}
{{- else if regexMatch "^[0-9]+$" $minute -}}
{{- if regexMatch "^[0-9]+$" $hour -}}
{{- $period = 86400 -}}
{{- else if regexMatch "^\\*/[0-9]+$" $hour -}}
{{- $step := int (trimPrefix "*/" $hour) -}}
{{- if and (gt $step 0) (eq (mod 24 $step) 0) -}}
{{- $period = mul 3600 $step -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $period -}}
{{- fail (printf "prometheusRule: cannot tell how often the schedule %q runs; set prometheusRule.runPeriod (e.g. 6h), the time between two runs the alerts' windows are made of" $schedule) -}}
{{- end -}}
{{- $period -}}
{{- end -}}
{{- end -}}

{{/* The alert rule groups for the release's kind, their windows made from the run period P:
see deploy/monitoring/rebalancer.rules.yaml (kind Deployment, P = 10m) and
deploy/monitoring/rebalancer-cronjob.rules.yaml (kind CronJob, P = 15m), which are these
groups rendered with the chart's defaults. */}}
{{- define "rebalancer.ruleGroups" -}}
{{- $kind := include "rebalancer.kind" . -}}
{{- $p := include "rebalancer.runPeriodSeconds" . | int -}}
{{- $twice := include "rebalancer.promDuration" (mul $p 2) -}}
{{- $skewFor := include "rebalancer.promDuration" (div (mul $p 5) 2) -}}
{{- $every := include "rebalancer.promDuration" $p -}}
groups:
  - name: rebalancer
    rules:
      - alert: RebalancerSkewAboveMaxSkew
        expr: rebalancer_unrepaired_skew > 0
        for: {{ $skewFor }}
        labels:
          severity: warning
        annotations:
          summary: "Topology spread skew left above maxSkew by 3 consecutive runs"
          description: >-
            {{`{{ $labels.namespace }}/{{ $labels.workload }} ended 3 consecutive runs {{ $value }}`}}
            above maxSkew, though each run's plan could repair it. `rebalancer plan` and the
            run's report (blocked-by-pdb, failed) show what stopped the evictions.
{{- if eq $kind "CronJob" }}
      - alert: RebalancerEvictionsBlockedByPDB
        expr: max by (job) (rebalancer_last_run_evictions{result="blocked-by-pdb"}) > 0
        for: {{ $skewFor }}
        labels:
          severity: warning
        annotations:
          summary: "Evictions blocked by PodDisruptionBudgets for 3 consecutive runs"
          description: >-
            {{`{{ $labels.job }}`}}: each of the last 3 runs had evictions refused by a
            PodDisruptionBudget. Check the PDBs of the workloads in the runs' logs (result
            blocked-by-pdb) or the RebalanceBlocked Events on the pods.
      - alert: RebalancerNoSuccessfulRun
        expr: |
          time() - max by (job) (rebalancer_last_success_timestamp_seconds) > {{ $p }}
          or
          (
            time() - max by (job) (rebalancer_last_run_timestamp_seconds offset {{ $every }})
            unless on (job)
            rebalancer_last_success_timestamp_seconds
          )
          or
          absent_over_time(rebalancer_last_run_timestamp_seconds[{{ $every }}])
        for: {{ $every }}
        labels:
          severity: warning
        annotations:
          summary: "No successful rebalancer run for 2 runs of the schedule"
          description: >-
            No rebalancer run ended ok in the last {{ $twice }} (2 runs of the schedule, one
            every {{ $every }}){{`{{ with $labels.job }} for job {{ . }}{{ else }}: no rebalancer
            metrics at all{{ end }}`}}. rebalancer_last_run_result says how the last run ended:
            evictions-failed or error (read the Job's log), lease-held (another rebalancer holds
            the Lease, or a Lease was renewed in the future), ok (the runs stopped).
{{- else }}
      - alert: RebalancerEvictionsBlockedByPDB
        expr: sum by (job) (increase(rebalancer_evictions_total{result="blocked-by-pdb"}[{{ include "rebalancer.promDuration" (div (mul $p 3) 2) }}])) > 0
        for: {{ include "rebalancer.promDuration" (mul $p 3) }}
        labels:
          severity: warning
        annotations:
          summary: "Evictions blocked by PodDisruptionBudgets for 3 consecutive runs"
          description: >-
            {{`{{ $labels.job }}`}}: each of the last 3 runs had evictions refused by a
            PodDisruptionBudget. Check the PDBs of the workloads in the runs' logs (result
            blocked-by-pdb) or the RebalanceBlocked Events on the pods.
      - alert: RebalancerNoSuccessfulRun
        expr: |
          (
            sum by (job) (increase(rebalancer_runs_total{result="ok"}[{{ $twice }}])) == 0
            and
            sum by (job) (rebalancer_runs_total{result="ok"} offset {{ $twice }})
          )
          or
          absent_over_time(rebalancer_runs_total{result="ok"}[{{ $twice }}])
        labels:
          severity: warning
        annotations:
          summary: "No successful rebalancer run for 2 intervals"
          description: >-
            No rebalancer run ended ok in the last {{ $twice }} (2 intervals of {{ $every }}){{`{{ with
            $labels.job }} in job {{ . }}{{ else }}: no rebalancer metrics at all{{ end }}`}}.
            rebalancer_runs_total by result tells why: evictions-failed, error, lease-held
            (another rebalancer holds the Lease, or a Lease renewed in the future), or no runs.
{{- end }}
{{- end -}}
