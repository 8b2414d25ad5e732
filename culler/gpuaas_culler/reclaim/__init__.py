"""culler/gpuaas_culler/reclaim"""
