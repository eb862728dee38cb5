"""The environment families of goalenvs. Import a module here only to use its classes directly."""
