"""jupyter_gpuaas/server"""
