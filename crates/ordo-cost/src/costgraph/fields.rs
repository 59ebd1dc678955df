//! Reading the objects of a cost graph: each node, link and tensor is type-checked as soon as
//! its object has been read, so no loosely typed copy of the graph is ever held.

use ordo_ir::Role;
use serde::de::MapAccess;
use serde_json::{Map, Value};

use super::raw::{Collected, Failure, FromMap, IntList, Key, Lite, Strings};
use super::{ColocationGroup, CostLink, CostNode, TensorRef};

/// The top-level object, its lists already checked item by item.
#[derive(Debug, Default)]
pub(crate) struct RawDoc {
    pub directed: Option<Lite>,
    pub multigraph: Option<Lite>,
    pub graph: Option<Value>,
    pub nodes: Option<Collected<CostNode, NodeError>>,
    pub links: Option<Collected<CostLink, LinkError>>,
    pub edges: Option<Collected<CostLink, LinkError>>,
    pub extra: Map<String, Value>,
}

impl FromMap for RawDoc {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut doc = RawDoc::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            match key.as_ref() {
                "directed" => doc.directed = Some(map.next_value()?),
                "multigraph" => doc.multigraph = Some(map.next_value()?),
                "graph" => doc.graph = Some(map.next_value()?),
                "nodes" => doc.nodes = Some(map.next_value()?),
                "links" => doc.links = Some(map.next_value()?),
                "edges" => doc.edges = Some(map.next_value()?),
                _ => {
                    doc.extra.insert(key.into_owned(), map.next_value()?);
                }
            }
        }
        Ok(doc)
    }
}

/// A node attribute that failed its check, with what is known to name the node.
#[derive(Debug)]
pub(crate) struct NodeError {
    pub id: Option<u64>,
    pub name: Option<String>,
    pub attribute: &'static str,
    pub problem: String,
}

/// A link attribute that failed its check, with the endpoints when they are valid.
#[derive(Debug)]
pub(crate) struct LinkError {
    pub source: Option<u64>,
    pub target: Option<u64>,
    pub attribute: String,
    pub problem: String,
}

/// A tensor attribute that failed its check.
#[derive(Debug)]
pub(crate) struct TensorError {
    pub attribute: &'static str,
    pub problem: String,
}

/// A required non-negative integer.
fn uint(value: Option<Lite>) -> Result<u64, String> {
    match value {
        None => Err("is missing".into()),
        Some(Lite::UInt(v)) => Ok(v),
        Some(Lite::Neg(v)) => Err(format!("is negative ({v})")),
        Some(other) => Err(format!("must be a non-negative integer, found {}", other.describe())),
    }
}

/// An optional non-negative integer; `null` counts as absent.
fn opt_uint(value: Option<Lite>) -> Result<Option<u64>, String> {
    match value {
        None | Some(Lite::Null) => Ok(None),
        value => uint(value).map(Some),
    }
}

/// An optional number in `(0, 1]`; absent or `null` is 1.
fn opt_share(value: Option<Lite>) -> Result<f64, String> {
    let share = match value {
        None | Some(Lite::Null) => return Ok(1.0),
        Some(Lite::UInt(v)) => v as f64,
        Some(Lite::Float(v)) => v,
        Some(Lite::Neg(v)) => v as f64,
        Some(other) => return Err(format!("must be a number, found {}", other.describe())),
    };
    match share_problem(share) {
        Some(problem) => Err(problem),
        None => Ok(share),
    }
}

/// Why `share` is not a share of a device, in `(0, 1]`.
pub(crate) fn share_problem(share: f64) -> Option<String> {
    (!(share > 0.0 && share <= 1.0))
        .then(|| format!("is {share}; it must be a share of the device, more than 0 and at most 1"))
}

/// Every role, in the order error messages list them.
const ROLES: [Role; 5] = [Role::Forward, Role::Dx, Role::Dw, Role::Update, Role::Comm];

/// The `role` attribute's value for `role`: the serde (kebab-case) name of [`Role`].
pub(crate) fn role_name(role: Role) -> &'static str {
    match role {
        Role::Forward => "forward",
        Role::Dx => "dx",
        Role::Dw => "dw",
        Role::Update => "update",
        Role::Comm => "comm",
    }
}

/// An optional role name; absent or `null` is [`Role::Forward`].
fn opt_role(value: Option<Lite>) -> Result<Role, String> {
    let expected = || {
        let names: Vec<String> = ROLES.iter().map(|&r| format!("{:?}", role_name(r))).collect();
        format!("must be one of {}", names.join(", "))
    };
    match value {
        None | Some(Lite::Null) => Ok(Role::Forward),
        Some(Lite::Str(name)) => match ROLES.iter().find(|&&r| role_name(r) == name) {
            Some(&role) => Ok(role),
            None => Err(format!("{}, found {}", expected(), Lite::Str(name).describe())),
        },
        Some(other) => Err(format!("{}, found {}", expected(), other.describe())),
    }
}

/// A required string.
fn string(value: Option<Lite>) -> Result<String, String> {
    match value {
        None => Err("is missing".into()),
        Some(Lite::Str(s)) => Ok(s),
        Some(other) => Err(format!("must be a string, found {}", other.describe())),
    }
}

/// An optional string; `null` counts as absent.
fn opt_string(value: Option<Lite>) -> Result<Option<String>, String> {
    match value {
        None | Some(Lite::Null) => Ok(None),
        value => string(value).map(Some),
    }
}

fn uint_list(value: Option<IntList>) -> Result<Vec<u64>, String> {
    match value {
        None => Err("is missing".into()),
        Some(IntList::Ints(ints)) => Ok(ints),
        Some(IntList::BadEntry(_, Lite::Neg(v))) => Err(format!("has a negative entry {v}")),
        Some(IntList::BadEntry(i, other)) => Err(format!(
            "must be a list of non-negative integers, found {} at position {i}",
            other.describe()
        )),
        Some(IntList::Other(other)) => {
            Err(format!("must be a list of integers, found {}", other.describe()))
        }
    }
}

fn colocation_group(value: Option<Strings>) -> Result<ColocationGroup, String> {
    let expected = "must be a string or a list of strings";
    match value {
        None | Some(Strings::Other(Lite::Null)) => Ok(ColocationGroup::Implicit),
        Some(Strings::One(name)) => Ok(ColocationGroup::Name(name)),
        Some(Strings::List(names)) => Ok(ColocationGroup::List(names)),
        Some(Strings::BadEntry(i, other)) => {
            Err(format!("{expected}, found {} at position {i}", other.describe()))
        }
        Some(Strings::Other(other)) => Err(format!("{expected}, found {}", other.describe())),
    }
}

#[derive(Default)]
struct RawNode {
    id: Option<Lite>,
    name: Option<Lite>,
    weight: Option<Lite>,
    temporary_memory: Option<Lite>,
    persistent_memory: Option<Lite>,
    output_memory: Option<IntList>,
    colocation_group: Option<Strings>,
    op_type: Option<Lite>,
    flops: Option<Lite>,
    occupancy: Option<Lite>,
    role: Option<Lite>,
    layer: Option<Lite>,
    extra: Map<String, Value>,
}

impl FromMap for Result<CostNode, NodeError> {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut raw = RawNode::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let slot = match key.as_ref() {
                "id" => &mut raw.id,
                "name" => &mut raw.name,
                "weight" => &mut raw.weight,
                "temporary_memory" => &mut raw.temporary_memory,
                "persistent_memory" => &mut raw.persistent_memory,
                "op_type" => &mut raw.op_type,
                "flops" => &mut raw.flops,
                "occupancy" => &mut raw.occupancy,
                "role" => &mut raw.role,
                "layer" => &mut raw.layer,
                "output_memory" => {
                    raw.output_memory = Some(map.next_value()?);
                    continue;
                }
                "colocation_group" => {
                    raw.colocation_group = Some(map.next_value()?);
                    continue;
                }
                _ => {
                    raw.extra.insert(key.into_owned(), map.next_value()?);
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(check_node(raw))
    }
}

fn check_node(raw: RawNode) -> Result<CostNode, NodeError> {
    let (id, name) = match (uint(raw.id), string(raw.name)) {
        (Ok(id), Ok(name)) => (id, name),
        (Err(problem), name) => {
            return Err(NodeError { id: None, name: name.ok(), attribute: "id", problem });
        }
        (Ok(id), Err(problem)) => {
            return Err(NodeError { id: Some(id), name: None, attribute: "name", problem });
        }
    };
    let fail = |attribute: &'static str, problem: String| NodeError {
        id: Some(id),
        name: Some(name.clone()),
        attribute,
        problem,
    };
    let weight = uint(raw.weight).map_err(|p| fail("weight", p))?;
    let temporary_memory = uint(raw.temporary_memory).map_err(|p| fail("temporary_memory", p))?;
    let persistent_memory =
        uint(raw.persistent_memory).map_err(|p| fail("persistent_memory", p))?;
    let output_memory = uint_list(raw.output_memory).map_err(|p| fail("output_memory", p))?;
    let colocation_group =
        colocation_group(raw.colocation_group).map_err(|p| fail("colocation_group", p))?;
    let op_type = opt_string(raw.op_type).map_err(|p| fail("op_type", p))?;
    let flops = opt_uint(raw.flops).map_err(|p| fail("flops", p))?;
    let occupancy = opt_share(raw.occupancy).map_err(|p| fail("occupancy", p))?;
    let role = opt_role(raw.role).map_err(|p| fail("role", p))?;
    let layer = opt_uint(raw.layer).map_err(|p| fail("layer", p))?;
    Ok(CostNode {
        id,
        name,
        weight,
        temporary_memory,
        persistent_memory,
        output_memory,
        colocation_group,
        op_type,
        flops,
        occupancy,
        role,
        layer,
        extra: raw.extra,
    })
}

#[derive(Default)]
struct RawLink {
    source: Option<Lite>,
    target: Option<Lite>,
    weight: Option<Lite>,
    tensor: Option<Collected<TensorRef, TensorError>>,
    extra: Map<String, Value>,
}

impl FromMap for Result<CostLink, LinkError> {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut raw = RawLink::default();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            match key.as_ref() {
                "source" => raw.source = Some(map.next_value()?),
                "target" => raw.target = Some(map.next_value()?),
                "weight" => raw.weight = Some(map.next_value()?),
                "tensor" => raw.tensor = Some(map.next_value()?),
                _ => {
                    raw.extra.insert(key.into_owned(), map.next_value()?);
                }
            }
        }
        Ok(check_link(raw))
    }
}

fn check_link(raw: RawLink) -> Result<CostLink, LinkError> {
    let end = |value: &Option<Lite>| match value {
        Some(Lite::UInt(id)) => Some(*id),
        _ => None,
    };
    let (source, target) = (end(&raw.source), end(&raw.target));
    let fail =
        |attribute: String, problem: String| LinkError { source, target, attribute, problem };
    let source = uint(raw.source).map_err(|p| fail("source".into(), p))?;
    let target = uint(raw.target).map_err(|p| fail("target".into(), p))?;
    let weight = uint(raw.weight).map_err(|p| fail("weight".into(), p))?;
    let tensor = match raw.tensor {
        None => return Err(fail("tensor".into(), "is missing".into())),
        Some(Collected::Items(tensors)) => tensors,
        Some(Collected::Failed(i, Failure::Item(e))) => {
            return Err(fail(format!("tensor[{i}].{}", e.attribute), e.problem));
        }
        Some(Collected::Failed(i, Failure::NotObject(found))) => {
            let problem = format!("must be an object, found {}", found.describe());
            return Err(fail(format!("tensor[{i}]"), problem));
        }
        Some(Collected::Other(found)) => {
            let problem = format!("must be a list of objects, found {}", found.describe());
            return Err(fail("tensor".into(), problem));
        }
    };
    Ok(CostLink { source, target, weight, tensor, extra: raw.extra })
}

impl FromMap for Result<TensorRef, TensorError> {
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let (mut name, mut num_bytes, mut weight) = (None, None, None);
        let mut extra = Map::new();
        while let Some(Key(key)) = map.next_key::<Key>()? {
            let slot = match key.as_ref() {
                "name" => &mut name,
                "num_bytes" => &mut num_bytes,
                "weight" => &mut weight,
                _ => {
                    extra.insert(key.into_owned(), map.next_value()?);
                    continue;
                }
            };
            *slot = Some(map.next_value::<Lite>()?);
        }
        Ok(check_tensor(name, num_bytes, weight, extra))
    }
}

fn check_tensor(
    name: Option<Lite>,
    num_bytes: Option<Lite>,
    weight: Option<Lite>,
    extra: Map<String, Value>,
) -> Result<TensorRef, TensorError> {
    let fail = |attribute: &'static str| move |problem| TensorError { attribute, problem };
    Ok(TensorRef {
        name: string(name).map_err(fail("name"))?,
        num_bytes: uint(num_bytes).map_err(fail("num_bytes"))?,
        weight: uint(weight).map_err(fail("weight"))?,
        extra,
    })
}
