//! FQ-CoDel, RFC 8290: frames hashed on their 5-tuple (perturbed per pipe from its seed) into
//! `flows` queues, served by deficit round robin with a list of new flows served before the
//! list of old ones (section 4.2), a CoDel on each queue (section 4.1), and on overflow the
//! head of the queue with the most bytes dropped (section 4.1.3).

use std::collections::VecDeque;

use latlab_wire::flow::FlowKey;

use super::codel::{Codel, CodelParams, CodelQueue};
use super::{Aqm, Discard, Held};

/// Which list a flow queue is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    /// Neither: the queue is empty and idle.
    Idle,
    /// The new flows' list.
    New,
    /// The old flows' list.
    Old,
}

/// One flow queue.
#[derive(Debug)]
struct FlowQueue {
    frames: VecDeque<Held>,
    bytes: usize,
    /// Bytes it may still send this round; may go negative by less than a frame.
    deficit: i64,
    list: List,
    codel: Codel,
}

/// FQ-CoDel's queues and lists.
#[derive(Debug)]
pub(crate) struct FqCodel {
    queues: Vec<FlowQueue>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    /// Frames in all queues.
    len: usize,
    /// Bytes in all queues: CoDel's backlog (as Linux's `fq_codel` gives its CoDels).
    bytes: usize,
    max_packet: usize,
    quantum: i64,
    params: CodelParams,
    /// The hash's key, from the pipe's seed.
    perturbation: u64,
}

/// One flow queue seen by its CoDel: pops keep the whole queue's counts.
struct View<'a> {
    queue: &'a mut FlowQueue,
    len: &'a mut usize,
    bytes: &'a mut usize,
    max_packet: usize,
}

impl CodelQueue for View<'_> {
    #[inline]
    fn pop(&mut self) -> Option<Held> {
        let held = self.queue.frames.pop_front()?;
        self.queue.bytes -= held.len as usize;
        *self.len -= 1;
        *self.bytes -= held.len as usize;
        Some(held)
    }

    #[inline]
    fn backlog_bytes(&self) -> usize {
        *self.bytes
    }

    #[inline]
    fn max_packet(&self) -> usize {
        self.max_packet
    }
}

/// A 64-bit mix (SplitMix64's finaliser).
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl FqCodel {
    pub(crate) fn new(aqm: &Aqm, seed: u64) -> FqCodel {
        let queues = (0..aqm.flows)
            .map(|_| FlowQueue {
                frames: VecDeque::new(),
                bytes: 0,
                deficit: 0,
                list: List::Idle,
                codel: Codel::default(),
            })
            .collect();
        FqCodel {
            queues,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            len: 0,
            bytes: 0,
            max_packet: 0,
            quantum: i64::from(aqm.quantum),
            params: CodelParams::of(aqm),
            perturbation: mix(seed ^ 0x6671_5f63_6f64_656c),
        }
    }

    /// New parameters; a new number of flows takes effect only with a new queue (the
    /// discipline's queues are kept while frames wait in them).
    pub(crate) fn set_params(&mut self, aqm: &Aqm) {
        self.quantum = i64::from(aqm.quantum);
        self.params = CodelParams::of(aqm);
    }

    /// The queue of `frame`: its 5-tuple (addresses, protocol, ports) hashed with the
    /// perturbation; a frame that is not IP by its EtherType.
    #[inline]
    pub(crate) fn classify(&self, frame: &[u8]) -> u32 {
        let key = FlowKey::read(frame);
        let mut h = self.perturbation;
        let mut add = |x: u64| h = mix(h ^ x);
        match key.ip {
            Some(ip) => {
                for addr in [ip.src, ip.dst] {
                    match addr {
                        std::net::IpAddr::V4(a) => add(u64::from(u32::from(a))),
                        std::net::IpAddr::V6(a) => {
                            let bits = u128::from(a);
                            add(bits as u64);
                            add((bits >> 64) as u64);
                        }
                    }
                }
                let (sport, dport) = ip.ports.unwrap_or((0, 0));
                add(u64::from(ip.protocol) << 32 | u64::from(sport) << 16 | u64::from(dport));
            }
            None => add(u64::from(key.ethertype.unwrap_or(0)) | 1 << 40),
        }
        // Multiply-shift onto 0..flows.
        ((u128::from(h) * self.queues.len() as u128) >> 64) as u32
    }

    /// Queues `held` on its flow queue; an idle queue joins the new flows with a quantum.
    #[inline]
    pub(crate) fn enqueue(&mut self, held: Held) {
        let queue = &mut self.queues[held.queue as usize];
        queue.bytes += held.len as usize;
        queue.frames.push_back(held);
        if queue.list == List::Idle {
            queue.list = List::New;
            queue.deficit = self.quantum;
            self.new_flows.push_back(held.queue);
        }
        self.len += 1;
        self.bytes += held.len as usize;
        self.max_packet = self.max_packet.max(held.len as usize);
    }

    /// RFC 8290 section 4.2: the next frame by deficit round robin, new flows first.
    pub(crate) fn dequeue(
        &mut self,
        now: u64,
        discarded: &mut Vec<(Held, Discard)>,
    ) -> Option<Held> {
        loop {
            let (index, from_new) = match self.new_flows.front() {
                Some(&i) => (i, true),
                None => (*self.old_flows.front()?, false),
            };
            let queue = &mut self.queues[index as usize];
            if queue.deficit <= 0 {
                queue.deficit += self.quantum;
                queue.list = List::Old;
                self.pop_list(from_new);
                self.old_flows.push_back(index);
                continue;
            }
            let mut codel = queue.codel;
            let mut view = View {
                queue,
                len: &mut self.len,
                bytes: &mut self.bytes,
                max_packet: self.max_packet,
            };
            let held = codel.dequeue(now, &self.params, &mut view, discarded);
            queue.codel = codel;
            match held {
                Some(held) => {
                    queue.deficit -= i64::from(held.len);
                    return Some(held);
                }
                None => {
                    // An empty new flow goes to the old list (so that it cannot come back
                    // as new at once); an empty old flow leaves the lists.
                    self.pop_list(from_new);
                    if from_new {
                        self.queues[index as usize].list = List::Old;
                        self.old_flows.push_back(index);
                    } else {
                        self.queues[index as usize].list = List::Idle;
                    }
                }
            }
        }
    }

    fn pop_list(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }

    /// The head of the queue with the most bytes, taken out (RFC 8290 section 4.1.3). Only
    /// the queues on the lists can hold frames, so only they are searched (the lowest index
    /// among equals).
    pub(crate) fn drop_from_fattest(&mut self) -> Option<Held> {
        let index = self
            .new_flows
            .iter()
            .chain(&self.old_flows)
            .map(|&i| (self.queues[i as usize].bytes, std::cmp::Reverse(i)))
            .max()
            .map(|(_, std::cmp::Reverse(i))| i as usize)?;
        let queue = &mut self.queues[index];
        let held = queue.frames.pop_front()?;
        queue.bytes -= held.len as usize;
        self.len -= 1;
        self.bytes -= held.len as usize;
        Some(held)
    }

    pub(crate) fn drain(&mut self) -> Vec<Held> {
        let mut all = Vec::with_capacity(self.len);
        for queue in &mut self.queues {
            all.extend(queue.frames.drain(..));
            queue.bytes = 0;
            queue.list = List::Idle;
        }
        self.new_flows.clear();
        self.old_flows.clear();
        self.len = 0;
        self.bytes = 0;
        all.sort_unstable_by_key(|held| held.seq);
        all
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of its flow queues and their entries, and of its lists.
    pub(crate) fn held_bytes(&self) -> usize {
        let entries: usize = self.queues.iter().map(|q| q.frames.capacity()).sum();
        let lists = self.new_flows.capacity() + self.old_flows.capacity();
        self.queues.capacity() * std::mem::size_of::<FlowQueue>()
            + entries * std::mem::size_of::<Held>()
            + lists * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::frames::udp4;
    use crate::Discipline;

    fn fq(seed: u64) -> FqCodel {
        let aqm = Aqm {
            discipline: Discipline::FqCodel,
            ..Aqm::default()
        };
        FqCodel::new(&aqm, seed)
    }

    #[test]
    fn the_hash_takes_the_5_tuple_perturbed_by_the_seed() {
        let q = fq(1);
        // The same flow, whatever the payload, always in one queue; 1000 flows spread over
        // the 1024 queues (a uniform hash fills about 1 − 1/e of them: 632).
        assert_eq!(
            q.classify(&udp4(40000, 53, 1)),
            q.classify(&udp4(40000, 53, 2))
        );
        let queues: std::collections::BTreeSet<u32> = (0..1000)
            .map(|i| q.classify(&udp4(40000 + i, 53, 0)))
            .collect();
        assert!((560..700).contains(&queues.len()), "{}", queues.len());
        // Another seed puts the same flow elsewhere (most of the time: 8 seeds, one queue each).
        let flow = udp4(40000, 53, 0);
        let by_seed: std::collections::BTreeSet<u32> =
            (0..8).map(|s| fq(s).classify(&flow)).collect();
        assert!(by_seed.len() > 4, "{by_seed:?}");
        // A frame that is not IP goes by its EtherType alone.
        let mut arp = vec![0x11u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut other_arp = vec![0x22u8; 60];
        other_arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(q.classify(&arp), q.classify(&other_arp));
    }
}
