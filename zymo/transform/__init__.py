"""zymo.transform"""
