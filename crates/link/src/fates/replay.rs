//! Naming frames by flow and position ([`FlowNumbers`]) and the recorded fates a replay looks
//! them up in ([`Replay`]).

use std::collections::HashMap;
use std::net::IpAddr;

use latlab_wire::flow::FlowKey;

use super::{FateFile, FlowId, Recorded};

/// A 5-tuple as a map key: addresses, protocol, ports (what [`FlowKey`] read).
type Tuple = (IpAddr, IpAddr, Option<(u16, u16)>);

/// One direction's flows as they appear: each frame's [`FlowId`] and position.
///
/// Call [`FlowNumbers::name`] for every frame of the direction, in arrival order. A new
/// 5-tuple allocates its entry once (a map insert); a known one costs a hash lookup.
#[derive(Debug, Default)]
pub struct FlowNumbers {
    /// Per class (EtherType, protocol): the 5-tuples seen, each with its number.
    tuples: HashMap<(u16, u8), HashMap<Tuple, u32>>,
    /// Frames seen per flow: the next position.
    next: HashMap<FlowId, u64>,
}

impl FlowNumbers {
    /// The flow of `frame` (an Ethernet frame as on the wire) and its position in it.
    pub fn name(&mut self, frame: &[u8]) -> (FlowId, u64) {
        let key = FlowKey::read(frame);
        let mut id = FlowId::class_of(&key);
        if let Some(ip) = key.ip {
            let class = self.tuples.entry((id.ethertype, ip.protocol)).or_default();
            let next = class.len() as u32;
            id.number = *class.entry((ip.src, ip.dst, ip.ports)).or_insert(next);
        }
        let position = self.next.entry(id).or_insert(0);
        let at = *position;
        *position += 1;
        (id, at)
    }
}

/// One direction's recorded fates by flow and position, each with whether it was taken.
type DirectionFates = HashMap<(FlowId, u64), (Recorded, bool)>;

/// The fates of a [`FateFile`], looked up by direction, flow and position, each taken once.
#[derive(Debug)]
pub struct Replay {
    /// Per direction: the fates by flow and position.
    flows: Vec<DirectionFates>,
    /// Fates in the file not yet taken.
    left: u64,
}

impl Replay {
    /// The fates of `file` (a position recorded twice keeps its last fate).
    pub fn new(file: &FateFile) -> Replay {
        let mut flows: Vec<DirectionFates> = vec![HashMap::new(); file.header.directions.len()];
        for r in &file.frames {
            if let Some(direction) = flows.get_mut(usize::from(r.direction)) {
                direction.insert((r.flow, r.position), (r.fate, false));
            }
        }
        let left = flows.iter().map(|d| d.len() as u64).sum();
        Replay { flows, left }
    }

    /// The recorded fate of the frame at `position` in `flow` of `direction`, once: `None` if
    /// the file has none for it (or it was taken already).
    pub fn take(&mut self, direction: usize, flow: FlowId, position: u64) -> Option<Recorded> {
        let slot = self.flows.get_mut(direction)?.get_mut(&(flow, position))?;
        if slot.1 {
            return None;
        }
        slot.1 = true;
        self.left -= 1;
        Some(slot.0)
    }

    /// Recorded fates no frame took so far (at the end: those the new run did not use).
    pub fn unused(&self) -> u64 {
        self.left
    }
}
