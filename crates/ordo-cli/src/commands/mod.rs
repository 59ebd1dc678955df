//! One module per subcommand.

pub mod export;
pub mod inspect;
pub mod models;
pub mod synth;
