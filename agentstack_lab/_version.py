"""The package's version.

A module that imports nothing, so any layer may read the version without an upward import of the
package root (which would close an import cycle through the IPython hooks).
"""

__version__ = "0.1.0"
