"""Shared code of the course *Attention, from kernels to Transformers*.

What every chapter uses lives here, once: the device choice, the data sets the chapters
generate offline, plotting helpers, the reference layers that later chapters build on,
and the checks the exercise tests call (:mod:`attention_course.checks`).
"""

__version__ = "0.1.0"
