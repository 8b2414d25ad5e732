"""GPU reading in a user's server: NVML, the fake NVML library, simulated holds, and which kernel
holds which memory. Nothing here touches NVML at import time."""
