// Placeholder: the module owner replaces this.
