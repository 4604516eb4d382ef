"""zymo.analysis"""
