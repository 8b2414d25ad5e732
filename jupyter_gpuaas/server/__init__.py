"""The Jupyter Server extension (``c.GPUaaS.*``): its handlers, the activity reporter and the one
client of the gpuaas hub service. Runs in a user's server; holds no Kubernetes credentials."""
