//! The layer's handles on the series that `cellrate-metrics` names: its
//! decisions ([`layer`]) and its Redis backend's failure mode ([`redis`]).

mod layer;
#[cfg(feature = "redis")]
pub(crate) mod redis;

pub(crate) use layer::*;
