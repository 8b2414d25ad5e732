# Binder: the GPU panel over simulated GPUs (the fake NVML library; the panel says "simulated").
c = get_config()  # noqa: F821

c.GPUaaS.gpu_source = "simulated"
# Two H100s, a third one time-shared with 6 GiB used by other pods, and an A100 split into
# seven 1g.5gb MIG devices.
c.GPUaaS.simulated_devices = "2xH100-80GB,1xH100-80GB:other=6GiB,1xA100-40GB:mig=7x1g.5gb"
c.GPUaaS.simulated_shared = ["2"]
