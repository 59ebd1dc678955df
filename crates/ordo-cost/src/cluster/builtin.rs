//! The shipped cluster descriptions, compiled in.

/// (name, file text), GPUs by generation, then the CPU, then clusters of nodes.
const SHIPPED: [(&str, &str); 16] = [
    ("v100x4-nvlink", include_str!("../../clusters/v100x4-nvlink.json")),
    ("v100x8-nvlink", include_str!("../../clusters/v100x8-nvlink.json")),
    ("v100x4-pcie", include_str!("../../clusters/v100x4-pcie.json")),
    ("v100x8-pcie", include_str!("../../clusters/v100x8-pcie.json")),
    ("a100x4-nvlink", include_str!("../../clusters/a100x4-nvlink.json")),
    ("a100x8-nvlink", include_str!("../../clusters/a100x8-nvlink.json")),
    ("a100x4-pcie", include_str!("../../clusters/a100x4-pcie.json")),
    ("a100x8-pcie", include_str!("../../clusters/a100x8-pcie.json")),
    ("h100x4-nvlink", include_str!("../../clusters/h100x4-nvlink.json")),
    ("h100x8-nvlink", include_str!("../../clusters/h100x8-nvlink.json")),
    ("h100x4-pcie", include_str!("../../clusters/h100x4-pcie.json")),
    ("h100x8-pcie", include_str!("../../clusters/h100x8-pcie.json")),
    ("cpu", include_str!("../../clusters/cpu.json")),
    ("a100x8-ib-hdr", include_str!("../../clusters/a100x8-ib-hdr.json")),
    ("h100x8-ib-ndr", include_str!("../../clusters/h100x8-ib-ndr.json")),
    ("h100x8-roce", include_str!("../../clusters/h100x8-roce.json")),
];

/// The text of the shipped cluster `name`.
pub(super) fn text(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|(n, _)| *n == name).map(|&(_, text)| text)
}

/// The shipped clusters' names.
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    SHIPPED.iter().map(|&(name, _)| name)
}
