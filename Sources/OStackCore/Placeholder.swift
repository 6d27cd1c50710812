// Placeholder: the module's owner replaces this file.
