"""jupyter_gpuaas/core"""
