"""The API adapter: HTTP to kube-apiserver, credentials, deadlines, one error map."""
