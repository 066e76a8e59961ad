// Placeholder: this module is filled in by its own work item.
