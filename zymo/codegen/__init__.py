"""zymo.codegen"""
