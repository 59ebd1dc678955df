//! Placeholder: the favorite-child LP of m-SCT.
