{{/* Chart name, truncated to 63 characters (a DNS label). */}}
{{- define "restysync.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of every object: fullnameOverride, else RELEASE-NAME (or RELEASE
when it already contains the chart name), truncated to 63 characters.
*/}}
{{- define "restysync.fullname" -}}
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

{{/* Name of the metrics Service (fullname-metrics, within 63 characters). */}}
{{- define "restysync.metricsName" -}}
{{- printf "%s-metrics" (include "restysync.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* chart label value: NAME-VERSION. */}}
{{- define "restysync.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select this release's pods. */}}
{{- define "restysync.selectorLabels" -}}
app.kubernetes.io/name: {{ include "restysync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Labels of every object. */}}
{{- define "restysync.labels" -}}
helm.sh/chart: {{ include "restysync.chart" . }}
{{ include "restysync.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Name of the ServiceAccount. */}}
{{- define "restysync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "restysync.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* image reference: repository@digest, else repository:tag. Call with (list image defaultTag). */}}
{{- define "restysync.image" -}}
{{- $img := index . 0 }}
{{- $default := index . 1 }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default $default $img.tag | toString) }}
{{- end }}
{{- end }}

{{/* Arguments of `restysync run`. */}}
{{- define "restysync.agentArgs" -}}
- run
- --source=kube
- --shared-dir={{ .Values.sharedDir }}
- --http-port={{ .Values.containerPorts.http }}
- --https-port={{ .Values.containerPorts.https }}
- --status-port={{ .Values.containerPorts.status }}
- --https-redirect-port={{ .Values.service.httpsPort }}
- --worker-processes={{ .Values.openresty.workerProcesses }}
- --lua-dict-mb={{ .Values.openresty.luaDictMB }}
- --ingress-class={{ .Values.ingressClass.name }}
{{- if .Values.agent.watchIngressWithoutClass }}
- --watch-ingress-without-class
{{- end }}
{{- with .Values.agent.defaultSSLCertificate }}
- --default-ssl-certificate={{ . }}
{{- end }}
{{- if .Values.agent.enableSSLPassthrough }}
- --enable-ssl-passthrough
{{- end }}
- --gateway-controller-name={{ .Values.gateway.controllerName }}
{{- with .Values.gateway.addresses }}
- --gateway-addresses={{ join "," . }}
{{- end }}
{{- if not .Values.gateway.services }}
- --gateway-services=false
{{- end }}
{{- if .Values.agent.watchNamespace }}
- --namespace={{ .Values.agent.watchNamespace }}
{{- end }}
{{- if .Values.service.publish }}
- --publish-service={{ .Release.Namespace }}/{{ include "restysync.fullname" . }}
{{- end }}
{{- if .Values.config.create }}
- --configmap={{ .Release.Namespace }}/{{ include "restysync.fullname" . }}-config
{{- end }}
{{- if .Values.tcp }}
- --tcp-services-configmap={{ .Release.Namespace }}/{{ include "restysync.fullname" . }}-tcp
{{- end }}
{{- if .Values.udp }}
- --udp-services-configmap={{ .Release.Namespace }}/{{ include "restysync.fullname" . }}-udp
{{- end }}
- --election-namespace=$(POD_NAMESPACE)
- --election-id={{ .Values.agent.electionID }}
- --pod-name=$(POD_NAME)
- --reload-timeout={{ .Values.agent.reloadTimeout }}
- --metrics-probes-address={{ .Values.agent.metricsAddress }}
- --metrics-address={{ .Values.agent.adminAddress }}
{{- with .Values.agent.allowInternalNetworks }}
- --allow-internal-networks={{ join "," . }}
{{- end }}
- --log-level={{ .Values.agent.logLevel }}
- --log-format={{ .Values.agent.logFormat }}
{{- with .Values.agent.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The agent container (a native sidecar adds restartPolicy: Always). */}}
{{- define "restysync.agentContainer" -}}
- name: agent
  image: {{ include "restysync.image" (list .Values.agent.image .Chart.AppVersion) }}
  imagePullPolicy: {{ .Values.agent.image.pullPolicy }}
  {{- if .Values.agent.nativeSidecar }}
  restartPolicy: Always
  {{- end }}
  args:
    {{- include "restysync.agentArgs" . | nindent 4 }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    # The pod's own address: no URL nginx connects to and no endpoint may
    # name it (--pod-ip reads POD_IP).
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    {{- with .Values.agent.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: metrics
      containerPort: {{ .Values.agent.metricsPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /healthz
      port: metrics
    periodSeconds: {{ .Values.agent.startupProbe.periodSeconds }}
    failureThreshold: {{ .Values.agent.startupProbe.failureThreshold }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: metrics
    periodSeconds: {{ .Values.agent.livenessProbe.periodSeconds }}
    timeoutSeconds: {{ .Values.agent.livenessProbe.timeoutSeconds }}
    failureThreshold: {{ .Values.agent.livenessProbe.failureThreshold }}
  readinessProbe:
    httpGet:
      path: /readyz?serving
      port: metrics
    periodSeconds: {{ .Values.agent.readinessProbe.periodSeconds }}
    timeoutSeconds: {{ .Values.agent.readinessProbe.timeoutSeconds }}
    failureThreshold: {{ .Values.agent.readinessProbe.failureThreshold }}
  resources:
    {{- toYaml .Values.agent.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.agent.securityContext | nindent 4 }}
  volumeMounts:
    - name: shared
      mountPath: {{ .Values.sharedDir }}
{{- end }}

{{/* The nginx container: stock OpenResty started on the shared dir. */}}
{{- define "restysync.openrestyContainer" -}}
- name: openresty
  image: {{ include "restysync.image" (list .Values.openresty.image "") }}
  imagePullPolicy: {{ .Values.openresty.image.pullPolicy }}
  {{- if .Values.agent.nativeSidecar }}
  # Starts after the agent's startup probe passed: nginx.conf exists.
  command:
    - openresty
    - -p
    - {{ trimSuffix "/" .Values.sharedDir }}/
    - -c
    - nginx.conf
    # nginx's messages from before it reads nginx.conf go to the container's
    # log too, not to a file in the emptyDir.
    - -e
    - stderr
    - -g
    - daemon off;
  {{- else }}
  {{- $start := printf "openresty -p %s/ -c nginx.conf -e stderr -g 'daemon off;'" (trimSuffix "/" .Values.sharedDir) }}
  # The agent is a plain container here, started at the same time: wait for
  # its first nginx.conf.
  command:
    - sh
    - -c
    - {{ printf "until [ -s %s/nginx.conf ]; do sleep 1; done; exec %s" (trimSuffix "/" .Values.sharedDir) $start | quote }}
  {{- end }}
  ports:
    - name: http
      containerPort: {{ .Values.containerPorts.http }}
      protocol: TCP
    - name: https
      containerPort: {{ .Values.containerPorts.https }}
      protocol: TCP
    - name: status
      containerPort: {{ .Values.containerPorts.status }}
      protocol: TCP
    {{- with include "restysync.streamPorts" (list . "containerPort") | trim }}
    {{- . | nindent 4 }}
    {{- end }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: status
    periodSeconds: {{ .Values.openresty.livenessProbe.periodSeconds }}
    timeoutSeconds: {{ .Values.openresty.livenessProbe.timeoutSeconds }}
    failureThreshold: {{ .Values.openresty.livenessProbe.failureThreshold }}
  readinessProbe:
    httpGet:
      path: /healthz
      port: status
    periodSeconds: {{ .Values.openresty.readinessProbe.periodSeconds }}
    timeoutSeconds: {{ .Values.openresty.readinessProbe.timeoutSeconds }}
    failureThreshold: {{ .Values.openresty.readinessProbe.failureThreshold }}
  # Keeps nginx serving while the endpoint leaves the Service, then sends
  # SIGQUIT and waits for the drain (files/prestop.sh).
  lifecycle:
    preStop:
      exec:
        command:
          - sh
          - -c
          - {{ .Files.Get "files/prestop.sh" | toJson }}
          - prestop
          - {{ .Values.openresty.preStop.sleepSeconds | toString | quote }}
          - {{ .Values.openresty.preStop.drainSeconds | toString | quote }}
          - {{ printf "%s/nginx.pid" (trimSuffix "/" .Values.sharedDir) | quote }}
  resources:
    {{- toYaml .Values.openresty.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.openresty.securityContext | nindent 4 }}
  volumeMounts:
    - name: shared
      mountPath: {{ .Values.sharedDir }}
{{- end }}

{{/*
One port per TCP and UDP service (values tcp and udp), named tcp-PORT or
udp-PORT. Call with (list . "containerPort") for the nginx container and
(list . "port") for the Service, whose ports target those names.
*/}}
{{- define "restysync.streamPorts" -}}
{{- $root := index . 0 }}
{{- $field := index . 1 }}
{{- range $protocol := list "tcp" "udp" }}
{{- range $port, $target := index $root.Values $protocol }}
- name: {{ $protocol }}-{{ $port }}
  {{ $field }}: {{ $port }}
  {{- if eq $field "port" }}
  targetPort: {{ $protocol }}-{{ $port }}
  {{- end }}
  protocol: {{ upper $protocol }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Fails on a TCP or UDP service port that the agent would leave out because
nginx serves HTTP on it (containerPorts, either protocol), and on a TCP one
that the agent listens on (agent.metricsPort: same network namespace) or
that the Service uses for HTTP or HTTPS (the API server refuses the Service).
*/}}
{{- define "restysync.checkStreamPorts" -}}
{{- $nginx := dict
  (toString .Values.containerPorts.http) "containerPorts.http"
  (toString .Values.containerPorts.https) "containerPorts.https"
  (toString .Values.containerPorts.status) "containerPorts.status" }}
{{- $service := dict
  (toString .Values.service.httpPort) "service.httpPort"
  (toString .Values.service.httpsPort) "service.httpsPort" }}
{{- range $protocol := list "tcp" "udp" }}
{{- range $port, $target := index $.Values $protocol }}
{{- with get $nginx $port }}
{{- fail (printf "%s.%s: port %s is %s, which nginx serves HTTP on: choose another port" $protocol $port $port .) }}
{{- end }}
{{- if eq $protocol "tcp" }}
{{- if eq $port (toString $.Values.agent.metricsPort) }}
{{- fail (printf "tcp.%s: port %s is agent.metricsPort, which the agent listens on in the pod: choose another port" $port $port) }}
{{- end }}
{{- if eq $port (regexReplaceAll "^.*:" $.Values.agent.adminAddress "") }}
{{- fail (printf "tcp.%s: port %s is the port of agent.adminAddress, which the agent listens on in the pod: choose another port" $port $port) }}
{{- end }}
{{- with get $service $port }}
{{- fail (printf "tcp.%s: port %s is %s, which the Service uses for HTTP already: choose another port" $port $port .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
