"""Runs in a notebook Job's pod (docs/jobs.md): fetch the notebook from the gpuaas service,
inject its parameters, execute it with nbclient, send the executed copy and the log back.

``python -m jupyter_gpuaas.job_pod`` is the Job's command (culler/gpuaas_service/jobs/build.py)."""
