//! Where a kernel forwarder's CPU time goes: the kernel functions of a sampling profile grouped
//! into the processing steps of the paper's Table II ("CPU cycles per packet and processing
//! step"), as Emmerich et al. define them in section V.A, and turned into cycles per packet.
//!
//! Self time only, as in the paper's figures: each sample counts for the function it was taken
//! in, not for its callers, so a spin lock taken on the transmit path counts as "other", not as
//! TX. A function belongs to the step of the first rule below its name matches, after its
//! compiler suffix is cut (everything from the first `.`: `.constprop.0`, `.isra.0`, `.part.0`,
//! `.cold`); a rule ending in `*` matches every name that starts with what precedes it, any
//! other rule only that name. A function no rule matches is [`KernelStep::Other`].
//!
//! | Step | Rules, in order (first match wins) |
//! |---|---|
//! | Idle | `default_idle*`, `pv_native_safe_halt`, `native_safe_halt`, `arch_cpu_idle*`, `cpuidle_*`, `do_idle`, `cpu_idle_poll*`, `poll_idle`, `intel_idle*`, `mwait_idle*`, `acpi_idle_*`, `acpi_safe_halt`, `amd_e400_idle`, `cpu_startup_entry`, `tick_nohz_idle_*` |
//! | Syscall/user | `entry_SYSCALL*`, `entry_SYSRETQ*`, `do_syscall_64`, `x64_sys_call`, `__x64_sys_*`, `__ia32_sys_*`, `__se_sys_*`, `__do_sys_*`, `__sys_*`, `ksys_*`, `syscall_*`, `exit_to_user_mode*`, and every user-space sample |
//! | RX (first) | `skb_gro_*`, `napi_gro_*`: GRO before the skb and NAPI rules below |
//! | skb (first) | `napi_skb_cache_*`, `napi_alloc_skb`, `__napi_alloc_skb`, `napi_build_skb`, `__napi_build_skb`, `napi_consume_skb`: skb constructors and destructors named after NAPI, before RX's `napi_*` |
//! | skb | `skb_*`, `__skb_*`, `kfree_skb*`, `__kfree_skb*`, `consume_skb`, `__consume_stateless_skb`, `__alloc_skb`, `alloc_skb*`, `__netdev_alloc_skb`, `netdev_alloc_skb*`, `__build_skb*`, `build_skb*`, `pskb_*`, `__pskb_*`, `__copy_skb_header`, `dev_kfree_skb*`, `__dev_kfree_skb*`, `sk_skb_reason_drop` |
//! | Mem. | `kmem_cache_*`, `__kmem_cache_*`, `kfree`, `kvfree`, `kmalloc*`, `__kmalloc*`, `krealloc*`, `page_frag_*`, `__page_frag_*`, `page_pool_*`, `__page_pool_*`, `slab_*`, `__slab_*`, `___slab_*`, `allocate_slab`, `new_slab`, `discard_slab`, `deactivate_slab`, `get_partial*`, `__free_pages*`, `free_unref_page*`, `free_unref_folios`, `__alloc_pages*`, `alloc_pages*`, `get_page_from_freelist`, `rmqueue*`, `__rmqueue*`, `free_pcppages_bulk`, `put_page`, `__put_page`, `__folio_put`, `folio_put*`, `mem_cgroup_charge*`, `__mem_cgroup_charge`, `obj_cgroup_charge*`, `obj_cgroup_uncharge*`, `memcg_slab_*`, `__memcg_slab_*`, `mod_memcg_*`, `__mod_memcg_*`, `refill_obj_stock`, `consume_obj_stock`, `drain_obj_stock`, `memcg_account_kmem` |
//! | TX | `dev_queue_xmit*`, `__dev_queue_xmit`, `dev_hard_start_xmit`, `sch_direct_xmit`, `qdisc_*`, `__qdisc_*`, `pfifo_fast_*`, `dev_qdisc_enqueue`, `__dev_xmit_skb`, `validate_xmit_*`, `netif_skb_features`, `netdev_core_pick_tx`, `netdev_pick_tx`, `dev_queue_xmit_nit`, `net_tx_action`, `veth_xmit`, `veth_forward_skb`, `veth_xdp_xmit*`, `veth_ndo_xdp_xmit`, `__netif_rx`, `netif_rx`, `netif_rx_internal`, `xsk_generic_xmit`, `__xsk_generic_xmit`, `xsk_sendmsg`, `__xsk_sendmsg`, `dev_direct_xmit`, `__dev_direct_xmit`, `packet_direct_xmit`, `loopback_xmit`, `xdp_do_flush*`, `__dev_flush`, `bq_xmit_all`, `dev_map_*` |
//! | RX | `netif_receive_skb*`, `__netif_receive_skb*`, `netif_receive_generic_xdp`, `do_xdp_generic`, `napi_*`, `__napi_*`, `____napi_*`, `net_rx_action`, `process_backlog`, `enqueue_to_backlog`, `veth_poll`, `veth_xdp_rcv*`, `eth_type_trans`, `gro_*`, `dev_gro_*`, `inet_gro_*`, `ipv6_gro_*`, `udp_gro_*`, `udp4_gro_*`, `tcp_gro_*`, `tcp4_gro_*`, `rps_*`, `get_rps_cpu`, `net_rps_*`, `__do_softirq`, `handle_softirqs`, `do_softirq*`, `__local_bh_enable_ip`, `irq_exit_rcu`, `__irq_exit_rcu`, `common_interrupt`, `asm_common_interrupt`, `__common_interrupt`, `handle_irq_event*`, `__handle_irq_event_percpu`, `handle_edge_irq`, `handle_fasteoi_irq`, `irqentry_*`, `asm_sysvec_call_function*`, `sysvec_call_function*`, `__sysvec_call_function*`, `generic_smp_call_function_single_interrupt`, `flush_smp_call_function_queue`, `__flush_smp_call_function_queue`, `raise_softirq*`, `__raise_softirq_irqoff`, `run_ksoftirqd`, `xsk_generic_rcv`, `xsk_rcv*`, `__xsk_rcv*`, `packet_rcv`, `tpacket_rcv` |
//! | Process. | `ip_*`, `__ip_*`, `ipv4_*`, `ip6_*`, `__ip6_*`, `ipv6_*`, `fib_*`, `__fib_*`, `fib4_*`, `fib6_*`, `neigh_*`, `__neigh_*`, `nf_*`, `__nf_*`, `nft_*`, `ipt_*`, `br_*`, `__br_*`, `nbp_*`, `bpf_*`, `__bpf_*`, `xdp_do_redirect*`, `xdp_do_generic_redirect*`, `__xsk_map_redirect`, `xsk_map_*`, `ovs_*`, `masked_flow_lookup`, `flow_lookup*`, `dst_*` |
//!
//! The interrupt entry and exit rules (`irqentry_*`, `irq_exit_rcu`) are RX, as the paper
//! counts "saving and restoring the context" to receiving; a timer interrupt passes through them
//! too, which on a loaded forwarder is little. Queued spin locks (`_raw_spin_lock*`,
//! `native_queued_spin_lock_slowpath`) stay in "other" whatever path took them.
//!
//! Samples become cycles with the time-stamp counter's rate: a step's samples at `freq_hz`
//! samples per second are `samples / freq_hz` seconds of CPU time, `× tsc_hz` cycles, and
//! `÷ packets` per packet ([`cycles_per_packet`]). No system call here: the profile is taken by
//! `latlab_io::profile`, and this module only matches names and divides.
//!
//! ```
//! use latlab_bench::kernel_steps::{KernelStep, KernelStepReport};
//! let functions = [
//!     ("__netif_receive_skb_core.constprop.0".to_string(), 30),
//!     ("ip_forward".to_string(), 20),
//!     ("pv_native_safe_halt".to_string(), 50),
//! ];
//! let report = KernelStepReport::from_functions(&functions, 0, 1_000);
//! assert_eq!(report.samples_of(KernelStep::Rx), 30);
//! assert_eq!(report.share_of(KernelStep::Idle), 0.5);
//! // 30 ms of RX at a 2 GHz counter over 60 000 packets: 1 000 cycles each.
//! assert_eq!(report.cycles_per_packet(KernelStep::Rx, 2e9, 60_000), Some(1_000.0));
//! ```

use serde::{Deserialize, Serialize};

/// A processing step of the paper's Table II, or where else a CPU's samples fell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KernelStep {
    /// Receiving a packet in the network stack and the driver: NAPI polls, the backlog, GRO,
    /// RPS, softirq entry and interrupt handling.
    Rx,
    /// Sending from `dev_queue_xmit` on: queueing disciplines, the driver's transmit (for a
    /// veth, handing the packet to its peer).
    Tx,
    /// Allocating and freeing the memory of packets (slab, page allocator, page pools, memory
    /// cgroup charges), without what is particular to an skbuff.
    Mem,
    /// Initialising, releasing or changing an skbuff (kernel packet buffer descriptor), its
    /// memory management excluded.
    Skb,
    /// Reaching the forwarding decision: IP input and forwarding, routing lookups, neighbours,
    /// netfilter, the bridge, XDP and BPF programs.
    Process,
    /// The idle loop: the CPU had nothing to do.
    Idle,
    /// System call entry and exit, and every sample taken in user space.
    Syscall,
    /// Everything else (spin locks, timers, the scheduler, …).
    Other,
}

impl KernelStep {
    /// Every step, in report order: the paper's five, then the rest.
    pub const ALL: [KernelStep; 8] = [
        KernelStep::Rx,
        KernelStep::Tx,
        KernelStep::Mem,
        KernelStep::Skb,
        KernelStep::Process,
        KernelStep::Idle,
        KernelStep::Syscall,
        KernelStep::Other,
    ];

    /// The step kernel function `function` belongs to (see the module's table); its compiler
    /// suffix (from the first `.`) is cut first.
    pub fn of_function(function: &str) -> KernelStep {
        let name = base_name(function);
        RULES
            .iter()
            .find(|(rule, _)| matches_rule(rule, name))
            .map_or(KernelStep::Other, |&(_, step)| step)
    }
}

/// `function` without its compiler suffix: `.constprop.0`, `.isra.0`, `.part.0`, `.cold` and
/// their combinations all start at the first `.`, which a C identifier never contains.
pub fn base_name(function: &str) -> &str {
    function.split_once('.').map_or(function, |(base, _)| base)
}

fn matches_rule(rule: &str, name: &str) -> bool {
    match rule.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == rule,
    }
}

use KernelStep::{Idle, Mem, Process, Rx, Skb, Syscall, Tx};

/// The rules of the module's table, in order: the first that matches a function's name gives
/// its step.
#[rustfmt::skip]
const RULES: &[(&str, KernelStep)] = &[
    // Idle.
    ("default_idle*", Idle), ("pv_native_safe_halt", Idle), ("native_safe_halt", Idle),
    ("arch_cpu_idle*", Idle), ("cpuidle_*", Idle), ("do_idle", Idle), ("cpu_idle_poll*", Idle),
    ("poll_idle", Idle), ("intel_idle*", Idle), ("mwait_idle*", Idle), ("acpi_idle_*", Idle),
    ("acpi_safe_halt", Idle), ("amd_e400_idle", Idle), ("cpu_startup_entry", Idle),
    ("tick_nohz_idle_*", Idle),
    // System calls.
    ("entry_SYSCALL*", Syscall), ("entry_SYSRETQ*", Syscall), ("do_syscall_64", Syscall),
    ("x64_sys_call", Syscall), ("__x64_sys_*", Syscall), ("__ia32_sys_*", Syscall),
    ("__se_sys_*", Syscall), ("__do_sys_*", Syscall), ("__sys_*", Syscall), ("ksys_*", Syscall),
    ("syscall_*", Syscall), ("exit_to_user_mode*", Syscall),
    // GRO, before the skb and NAPI rules.
    ("skb_gro_*", Rx), ("napi_gro_*", Rx),
    // skb constructors and destructors named after NAPI, before RX's napi_*.
    ("napi_skb_cache_*", Skb), ("napi_alloc_skb", Skb), ("__napi_alloc_skb", Skb),
    ("napi_build_skb", Skb), ("__napi_build_skb", Skb), ("napi_consume_skb", Skb),
    // skb, before Mem's kfree.
    ("skb_*", Skb), ("__skb_*", Skb), ("kfree_skb*", Skb), ("__kfree_skb*", Skb),
    ("consume_skb", Skb), ("__consume_stateless_skb", Skb), ("__alloc_skb", Skb),
    ("alloc_skb*", Skb), ("__netdev_alloc_skb", Skb), ("netdev_alloc_skb*", Skb),
    ("__build_skb*", Skb), ("build_skb*", Skb), ("pskb_*", Skb), ("__pskb_*", Skb),
    ("__copy_skb_header", Skb), ("dev_kfree_skb*", Skb), ("__dev_kfree_skb*", Skb),
    ("sk_skb_reason_drop", Skb),
    // Memory.
    ("kmem_cache_*", Mem), ("__kmem_cache_*", Mem), ("kfree", Mem), ("kvfree", Mem),
    ("kmalloc*", Mem), ("__kmalloc*", Mem), ("krealloc*", Mem), ("page_frag_*", Mem),
    ("__page_frag_*", Mem), ("page_pool_*", Mem), ("__page_pool_*", Mem), ("slab_*", Mem),
    ("__slab_*", Mem), ("___slab_*", Mem), ("allocate_slab", Mem), ("new_slab", Mem),
    ("discard_slab", Mem), ("deactivate_slab", Mem), ("get_partial*", Mem),
    ("__free_pages*", Mem), ("free_unref_page*", Mem), ("free_unref_folios", Mem),
    ("__alloc_pages*", Mem), ("alloc_pages*", Mem), ("get_page_from_freelist", Mem),
    ("rmqueue*", Mem), ("__rmqueue*", Mem), ("free_pcppages_bulk", Mem), ("put_page", Mem),
    ("__put_page", Mem), ("__folio_put", Mem), ("folio_put*", Mem),
    ("mem_cgroup_charge*", Mem), ("__mem_cgroup_charge", Mem), ("obj_cgroup_charge*", Mem),
    ("obj_cgroup_uncharge*", Mem), ("memcg_slab_*", Mem), ("__memcg_slab_*", Mem),
    ("mod_memcg_*", Mem), ("__mod_memcg_*", Mem), ("refill_obj_stock", Mem),
    ("consume_obj_stock", Mem), ("drain_obj_stock", Mem), ("memcg_account_kmem", Mem),
    // Transmit.
    ("dev_queue_xmit*", Tx), ("__dev_queue_xmit", Tx), ("dev_hard_start_xmit", Tx),
    ("sch_direct_xmit", Tx), ("qdisc_*", Tx), ("__qdisc_*", Tx), ("pfifo_fast_*", Tx),
    ("dev_qdisc_enqueue", Tx), ("__dev_xmit_skb", Tx), ("validate_xmit_*", Tx),
    ("netif_skb_features", Tx), ("netdev_core_pick_tx", Tx), ("netdev_pick_tx", Tx),
    ("dev_queue_xmit_nit", Tx), ("net_tx_action", Tx), ("veth_xmit", Tx),
    ("veth_forward_skb", Tx), ("veth_xdp_xmit*", Tx), ("veth_ndo_xdp_xmit", Tx),
    ("__netif_rx", Tx), ("netif_rx", Tx), ("netif_rx_internal", Tx),
    ("xsk_generic_xmit", Tx), ("__xsk_generic_xmit", Tx), ("xsk_sendmsg", Tx),
    ("__xsk_sendmsg", Tx), ("dev_direct_xmit", Tx), ("__dev_direct_xmit", Tx),
    ("packet_direct_xmit", Tx), ("loopback_xmit", Tx), ("xdp_do_flush*", Tx),
    ("__dev_flush", Tx), ("bq_xmit_all", Tx), ("dev_map_*", Tx),
    // Receive.
    ("netif_receive_skb*", Rx), ("__netif_receive_skb*", Rx), ("netif_receive_generic_xdp", Rx),
    ("do_xdp_generic", Rx), ("napi_*", Rx), ("__napi_*", Rx), ("____napi_*", Rx),
    ("net_rx_action", Rx), ("process_backlog", Rx), ("enqueue_to_backlog", Rx),
    ("veth_poll", Rx), ("veth_xdp_rcv*", Rx), ("eth_type_trans", Rx), ("gro_*", Rx),
    ("dev_gro_*", Rx), ("inet_gro_*", Rx), ("ipv6_gro_*", Rx), ("udp_gro_*", Rx),
    ("udp4_gro_*", Rx), ("tcp_gro_*", Rx), ("tcp4_gro_*", Rx), ("rps_*", Rx),
    ("get_rps_cpu", Rx), ("net_rps_*", Rx), ("__do_softirq", Rx), ("handle_softirqs", Rx),
    ("do_softirq*", Rx), ("__local_bh_enable_ip", Rx), ("irq_exit_rcu", Rx),
    ("__irq_exit_rcu", Rx), ("common_interrupt", Rx), ("asm_common_interrupt", Rx),
    ("__common_interrupt", Rx), ("handle_irq_event*", Rx), ("__handle_irq_event_percpu", Rx),
    ("handle_edge_irq", Rx), ("handle_fasteoi_irq", Rx), ("irqentry_*", Rx),
    ("asm_sysvec_call_function*", Rx), ("sysvec_call_function*", Rx),
    ("__sysvec_call_function*", Rx), ("generic_smp_call_function_single_interrupt", Rx),
    ("flush_smp_call_function_queue", Rx), ("__flush_smp_call_function_queue", Rx),
    ("raise_softirq*", Rx), ("__raise_softirq_irqoff", Rx), ("run_ksoftirqd", Rx),
    ("xsk_generic_rcv", Rx), ("xsk_rcv*", Rx), ("__xsk_rcv*", Rx), ("packet_rcv", Rx),
    ("tpacket_rcv", Rx),
    // Processing: the forwarding decision.
    ("ip_*", Process), ("__ip_*", Process), ("ipv4_*", Process), ("ip6_*", Process),
    ("__ip6_*", Process), ("ipv6_*", Process), ("fib_*", Process), ("__fib_*", Process),
    ("fib4_*", Process), ("fib6_*", Process), ("neigh_*", Process), ("__neigh_*", Process),
    ("nf_*", Process), ("__nf_*", Process), ("nft_*", Process), ("ipt_*", Process),
    ("br_*", Process), ("__br_*", Process), ("nbp_*", Process), ("bpf_*", Process),
    ("__bpf_*", Process), ("xdp_do_redirect*", Process), ("xdp_do_generic_redirect*", Process),
    ("__xsk_map_redirect", Process), ("xsk_map_*", Process), ("ovs_*", Process),
    ("masked_flow_lookup", Process), ("flow_lookup*", Process), ("dst_*", Process),
];

/// The samples of one step.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSamples {
    /// The step.
    pub step: KernelStep,
    /// Samples in its functions (for [`KernelStep::Syscall`], user-space samples included).
    pub samples: u64,
    /// Its fraction of all samples of the report, 0 to 1 (0 when there are none).
    pub share: f64,
}

/// A function that fell in [`KernelStep::Other`], for a reviewer to see what the rules miss.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSamples {
    /// The function's name as profiled.
    pub function: String,
    /// Its samples.
    pub samples: u64,
}

/// A CPU's samples grouped into the steps of the paper's Table II and the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelStepReport {
    /// The sampling rate, in samples per second of CPU time.
    pub freq_hz: u64,
    /// Every sample counted: kernel samples of the functions given and user-space samples.
    pub samples: u64,
    /// One entry per step, in [`KernelStep::ALL`] order.
    pub steps: Vec<StepSamples>,
    /// The functions of [`KernelStep::Other`] with the most samples, at most
    /// [`KernelStepReport::OTHER_SHOWN`], most first.
    pub other_functions: Vec<FunctionSamples>,
}

impl KernelStepReport {
    /// How many of the "other" functions a report keeps.
    pub const OTHER_SHOWN: usize = 20;

    /// Groups `functions` (kernel samples by function name, as `Samples::by_function` of
    /// `latlab_io::profile` gives them) into steps, and counts `user_samples` as
    /// [`KernelStep::Syscall`]; `freq_hz` is the sampling rate.
    pub fn from_functions(
        functions: &[(String, u64)],
        user_samples: u64,
        freq_hz: u64,
    ) -> KernelStepReport {
        let mut per_step = [0u64; KernelStep::ALL.len()];
        let mut other: Vec<FunctionSamples> = Vec::new();
        per_step[index(KernelStep::Syscall)] += user_samples;
        for (function, n) in functions {
            let step = KernelStep::of_function(function);
            per_step[index(step)] += n;
            if step == KernelStep::Other {
                other.push(FunctionSamples {
                    function: function.clone(),
                    samples: *n,
                });
            }
        }
        other.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.function.cmp(&b.function)));
        other.truncate(Self::OTHER_SHOWN);
        let samples: u64 = per_step.iter().sum();
        let steps = KernelStep::ALL
            .iter()
            .map(|&step| {
                let n = per_step[index(step)];
                StepSamples {
                    step,
                    samples: n,
                    share: if samples == 0 {
                        0.0
                    } else {
                        n as f64 / samples as f64
                    },
                }
            })
            .collect();
        KernelStepReport {
            freq_hz,
            samples,
            steps,
            other_functions: other,
        }
    }

    /// The samples of `step`.
    pub fn samples_of(&self, step: KernelStep) -> u64 {
        self.steps
            .iter()
            .find(|s| s.step == step)
            .map_or(0, |s| s.samples)
    }

    /// The share of `step` in all samples, 0 to 1.
    pub fn share_of(&self, step: KernelStep) -> f64 {
        self.steps
            .iter()
            .find(|s| s.step == step)
            .map_or(0.0, |s| s.share)
    }

    /// The TSC cycles per packet `step` took (see [`cycles_per_packet`]).
    pub fn cycles_per_packet(&self, step: KernelStep, tsc_hz: f64, packets: u64) -> Option<f64> {
        cycles_per_packet(self.samples_of(step), self.freq_hz, tsc_hz, packets)
    }
}

fn index(step: KernelStep) -> usize {
    step as usize
}

/// The cycles per packet a step took: its `samples` at `freq_hz` samples per second are
/// `samples / freq_hz` seconds of CPU time, which at a time-stamp counter of `tsc_hz` cycles
/// per second are `× tsc_hz` cycles, shared by `packets` packets. `None` when `freq_hz` or
/// `packets` is 0 or `tsc_hz` is not a positive number.
///
/// The figure is as good as the profile: a sample stands for `1 / freq_hz` seconds, so a step
/// with `n` samples is known to about `√n` samples.
///
/// ```
/// use latlab_bench::kernel_steps::cycles_per_packet;
/// // 500 samples at 1 kHz: 0.5 s of CPU, 1.2 × 10⁹ cycles at 2.4 GHz, over 10⁶ packets.
/// assert_eq!(cycles_per_packet(500, 1_000, 2.4e9, 1_000_000), Some(1_200.0));
/// assert_eq!(cycles_per_packet(500, 1_000, 2.4e9, 0), None);
/// ```
pub fn cycles_per_packet(samples: u64, freq_hz: u64, tsc_hz: f64, packets: u64) -> Option<f64> {
    if freq_hz == 0 || packets == 0 || !(tsc_hz.is_finite() && tsc_hz > 0.0) {
        return None;
    }
    Some(samples as f64 / freq_hz as f64 * tsc_hz / packets as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(f: &str) -> KernelStep {
        KernelStep::of_function(f)
    }

    #[test]
    fn compiler_suffixes_are_cut_before_matching() {
        assert_eq!(
            base_name("__netif_receive_skb_core.constprop.0"),
            "__netif_receive_skb_core"
        );
        assert_eq!(base_name("ip_forward.isra.0"), "ip_forward");
        assert_eq!(
            base_name("skb_release_data.part.0.cold"),
            "skb_release_data"
        );
        assert_eq!(base_name("veth_xmit"), "veth_xmit");
        assert_eq!(step("__netif_receive_skb_core.constprop.0"), Rx);
        assert_eq!(step("fib_table_lookup.cold"), Process);
        assert_eq!(step("kfree.part.0"), Mem);
    }

    #[test]
    fn receive_functions_are_rx() {
        for f in [
            "__netif_receive_skb_core.constprop.0",
            "netif_receive_skb_list_internal",
            "__netif_receive_skb_one_core",
            "napi_complete_done",
            "__napi_poll",
            "napi_gro_receive",
            "net_rx_action",
            "process_backlog",
            "enqueue_to_backlog",
            "veth_poll",
            "veth_xdp_rcv.constprop.0",
            "eth_type_trans",
            "dev_gro_receive",
            "skb_gro_receive",
            "handle_softirqs",
            "__do_softirq",
            "irqentry_exit",
            "__flush_smp_call_function_queue",
        ] {
            assert_eq!(step(f), Rx, "{f}");
        }
    }

    #[test]
    fn transmit_functions_are_tx() {
        for f in [
            "__dev_queue_xmit",
            "dev_hard_start_xmit",
            "sch_direct_xmit",
            "pfifo_fast_dequeue",
            "__qdisc_run",
            "validate_xmit_skb",
            "veth_xmit",
            "veth_forward_skb",
            "__netif_rx",
            "netif_rx_internal",
            "__xsk_generic_xmit",
        ] {
            assert_eq!(step(f), Tx, "{f}");
        }
    }

    #[test]
    fn memory_functions_are_mem() {
        for f in [
            "kmem_cache_alloc_node_noprof",
            "kmem_cache_free",
            "kfree",
            "__kmalloc_node_track_caller_noprof",
            "kmalloc_reserve",
            "page_frag_alloc_align",
            "page_pool_alloc_pages",
            "__slab_free",
            "___slab_alloc",
            "__memcg_slab_post_alloc_hook",
            "obj_cgroup_charge",
        ] {
            assert_eq!(step(f), Mem, "{f}");
        }
    }

    #[test]
    fn skbuff_functions_are_skb_not_mem() {
        for f in [
            "skb_release_data",
            "skb_release_head_state",
            "__skb_clone",
            "skb_clone",
            "kfree_skb_reason",
            "kfree_skbmem",
            "consume_skb",
            "__alloc_skb",
            "__build_skb_around",
            "napi_skb_cache_put",
            "napi_build_skb",
            "__napi_alloc_skb",
            "pskb_expand_head",
            "__copy_skb_header",
        ] {
            assert_eq!(step(f), Skb, "{f}");
        }
    }

    #[test]
    fn forwarding_decisions_are_process() {
        for f in [
            "ip_forward",
            "ip_rcv",
            "ip_rcv_core",
            "ip_rcv_finish_core.constprop.0",
            "ip_route_input_noref",
            "ip_finish_output2",
            "ip_output",
            "fib_table_lookup",
            "neigh_resolve_output",
            "nf_hook_slow",
            "br_handle_frame",
            "br_forward_finish",
            "bpf_prog_4a1a6f2a4e1bb0c2_xdp_redirect",
            "xdp_do_redirect",
            "__xsk_map_redirect",
        ] {
            assert_eq!(step(f), Process, "{f}");
        }
    }

    #[test]
    fn idle_syscalls_and_the_rest() {
        for f in [
            "pv_native_safe_halt",
            "default_idle",
            "do_idle",
            "cpuidle_enter_state",
        ] {
            assert_eq!(step(f), Idle, "{f}");
        }
        for f in [
            "entry_SYSCALL_64",
            "do_syscall_64",
            "__sys_sendto",
            "__x64_sys_sendto",
        ] {
            assert_eq!(step(f), Syscall, "{f}");
        }
        for f in [
            "native_queued_spin_lock_slowpath",
            "_raw_spin_lock",
            "__schedule",
            "asm_sysvec_apic_timer_interrupt",
            "ipvlan_queue_xmit", // "ip*" without the underscore is not IP
            "",
        ] {
            assert_eq!(step(f), KernelStep::Other, "{f}");
        }
    }

    #[test]
    fn a_report_adds_steps_and_keeps_the_other_functions() {
        let functions: Vec<(String, u64)> = [
            ("veth_xmit", 10),
            ("veth_poll", 20),
            ("kmem_cache_free", 5),
            ("skb_release_data", 5),
            ("ip_forward", 20),
            ("_raw_spin_lock", 7),
            ("__schedule", 3),
            ("pv_native_safe_halt", 20),
        ]
        .iter()
        .map(|&(f, n)| (f.to_string(), n))
        .collect();
        let report = KernelStepReport::from_functions(&functions, 10, 10_000);
        assert_eq!(report.samples, 100);
        let figures: Vec<(KernelStep, u64)> =
            report.steps.iter().map(|s| (s.step, s.samples)).collect();
        assert_eq!(
            figures,
            [
                (Rx, 20),
                (Tx, 10),
                (Mem, 5),
                (Skb, 5),
                (Process, 20),
                (Idle, 20),
                (Syscall, 10),
                (KernelStep::Other, 10)
            ]
        );
        assert_eq!(report.share_of(Process), 0.2);
        assert_eq!(
            report.other_functions,
            [
                FunctionSamples {
                    function: "_raw_spin_lock".into(),
                    samples: 7
                },
                FunctionSamples {
                    function: "__schedule".into(),
                    samples: 3
                },
            ]
        );
        // 20 samples at 10 kHz = 2 ms; at 3 GHz 6 × 10⁶ cycles over 1 000 packets.
        assert_eq!(report.cycles_per_packet(Process, 3e9, 1_000), Some(6_000.0));
        let empty = KernelStepReport::from_functions(&[], 0, 10_000);
        assert!(empty.steps.iter().all(|s| s.samples == 0 && s.share == 0.0));
    }

    #[test]
    fn a_report_reads_back_from_its_json() {
        let functions = [
            ("veth_poll".to_string(), 3),
            ("_raw_spin_lock".to_string(), 1),
        ];
        let report = KernelStepReport::from_functions(&functions, 1, 997);
        let json = serde_json::to_string(&report).unwrap();
        assert!(
            json.contains(r#"{"step":"Rx","samples":3,"share":0.6}"#),
            "{json}"
        );
        let back: KernelStepReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn cycles_per_packet_refuses_what_it_cannot_divide() {
        assert_eq!(cycles_per_packet(1, 0, 1e9, 1), None);
        assert_eq!(cycles_per_packet(1, 1, f64::NAN, 1), None);
        assert_eq!(cycles_per_packet(1, 1, -1.0, 1), None);
        assert_eq!(cycles_per_packet(0, 1_000, 1e9, 1), Some(0.0));
    }

    #[test]
    fn every_rule_is_reachable() {
        // A rule shadowed by an earlier one would be dead weight in the table.
        for (i, (rule, want)) in RULES.iter().enumerate() {
            let example = rule.trim_end_matches('*');
            let first = RULES
                .iter()
                .position(|(r, _)| matches_rule(r, example))
                .unwrap();
            assert!(
                first == i || RULES[first].1 == *want,
                "{rule} ({want:?}) is shadowed by {} ({:?})",
                RULES[first].0,
                RULES[first].1
            );
        }
    }
}
