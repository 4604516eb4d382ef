"""zymo.ir"""
