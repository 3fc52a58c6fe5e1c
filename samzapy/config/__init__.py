"""Configuration: the .properties reader, the key catalogue and the typed job view."""
