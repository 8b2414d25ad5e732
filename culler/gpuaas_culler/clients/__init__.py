"""culler/gpuaas_culler/clients"""
