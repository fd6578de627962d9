//! The metadata model: modules, objects, fields, screens, validation and inheritance.
