//! ordo's cost stage.
