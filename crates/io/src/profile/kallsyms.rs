//! The kernel's text symbols from `/proc/kallsyms`, to name the function a sample's
//! instruction pointer is in.

use std::io;

/// One text symbol: a function of the kernel or of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Its start address.
    pub addr: u64,
    /// The function's name as the kernel spells it, compiler suffixes (`.constprop.0`,
    /// `.isra.0`, `.cold`) included.
    pub name: String,
    /// The module it belongs to (`veth`, `bridge`, `bpf` for JIT-compiled programs), `None`
    /// for the kernel image.
    pub module: Option<String>,
}

/// The kernel's text symbols (types `t`, `T`, `w`, `W`) sorted by address.
///
/// `/proc/kallsyms` gives no sizes, so an address belongs to the last symbol that starts at or
/// before it; an address past the end of the last function is still given that function.
#[derive(Clone, Debug, Default)]
pub struct KernelSymbols {
    symbols: Vec<KernelSymbol>,
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. Fails, saying why, when every address reads 0: the kernel hides
    /// them from this process (`kernel.kptr_restrict`, or not root).
    pub fn load() -> io::Result<KernelSymbols> {
        let text = std::fs::read_to_string("/proc/kallsyms")
            .map_err(|e| io::Error::new(e.kind(), format!("read /proc/kallsyms: {e}")))?;
        KernelSymbols::parse(&text).map_err(|e| {
            let restrict = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            io::Error::new(
                e.kind(),
                format!("{e} (kernel.kptr_restrict is {restrict}; run as root, with kptr_restrict 0 or 1)"),
            )
        })
    }

    /// Parses the text of `/proc/kallsyms`: lines of `address type name [module]`. Lines of
    /// other symbol types and lines that do not parse are skipped; of several symbols at one
    /// address the first listed is kept.
    pub fn parse(text: &str) -> io::Result<KernelSymbols> {
        let mut symbols = Vec::new();
        let mut listed = 0usize;
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            listed += 1;
            if !matches!(kind, "t" | "T" | "w" | "W") || addr == 0 {
                continue;
            }
            let module = fields
                .next()
                .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                .map(str::to_string);
            symbols.push(KernelSymbol {
                addr,
                name: name.to_string(),
                module,
            });
        }
        if symbols.is_empty() {
            let why = if listed > 0 {
                format!("every address of the {listed} symbols in /proc/kallsyms reads 0 or none is text")
            } else {
                "no symbol in /proc/kallsyms".to_string()
            };
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
        }
        symbols.sort_by_key(|s| s.addr); // stable: the first listed stays first
        symbols.dedup_by_key(|s| s.addr);
        Ok(KernelSymbols { symbols })
    }

    /// The name of the function `ip` is in; `None` before the first symbol.
    pub fn lookup(&self, ip: u64) -> Option<&str> {
        self.symbol(ip).map(|s| s.name.as_str())
    }

    /// The symbol `ip` is in; `None` before the first symbol.
    pub fn symbol(&self, ip: u64) -> Option<&KernelSymbol> {
        let after = self.symbols.partition_point(|s| s.addr <= ip);
        after.checked_sub(1).map(|i| &self.symbols[i])
    }

    /// How many text symbols there are.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether there are none (only for a default value: [`KernelSymbols::parse`] fails then).
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81001000 t __pfx_ip_forward
ffffffff81001010 T ip_forward
ffffffff81001400 d ip_forward_data
ffffffff81002000 t __netif_receive_skb_core.constprop.0
ffffffff81003000 W arch_cpu_idle
ffffffff81004000 r some_rodata
ffffffff81005000 B some_bss
0000000000030000 A fixed_percpu_data
ffffffffc0a00000 t veth_xmit\t[veth]
ffffffffc0a00400 t veth_poll\t[veth]
ffffffffc0b00000 t br_handle_frame\t[bridge]
not a line
";

    #[test]
    fn text_symbols_are_found_by_address_and_others_skipped() {
        let syms = KernelSymbols::parse(FIXTURE).unwrap();
        assert_eq!(syms.len(), 8);
        assert_eq!(syms.lookup(0xffffffff81000000), Some("_stext"));
        assert_eq!(syms.lookup(0xffffffff81000fff), Some("_stext"));
        assert_eq!(syms.lookup(0xffffffff8100100f), Some("__pfx_ip_forward"));
        assert_eq!(syms.lookup(0xffffffff81001010), Some("ip_forward"));
        // A data symbol between two functions is no boundary.
        assert_eq!(syms.lookup(0xffffffff81001500), Some("ip_forward"));
        assert_eq!(
            syms.lookup(0xffffffff81002abc),
            Some("__netif_receive_skb_core.constprop.0")
        );
        assert_eq!(syms.lookup(0xffffffff81005000), Some("arch_cpu_idle"));
    }

    #[test]
    fn module_symbols_keep_their_module_apart() {
        let syms = KernelSymbols::parse(FIXTURE).unwrap();
        let s = syms.symbol(0xffffffffc0a00010).unwrap();
        assert_eq!(
            (s.name.as_str(), s.module.as_deref()),
            ("veth_xmit", Some("veth"))
        );
        assert_eq!(syms.lookup(0xffffffffc0a00500), Some("veth_poll"));
        let s = syms.symbol(0xffffffffc0b00001).unwrap();
        assert_eq!(s.module.as_deref(), Some("bridge"));
        assert_eq!(syms.symbol(0xffffffff81001010).unwrap().module, None);
    }

    #[test]
    fn an_address_before_the_first_symbol_has_none() {
        let syms = KernelSymbols::parse(FIXTURE).unwrap();
        assert_eq!(syms.lookup(0xffffffff80ffffff), None);
        assert_eq!(syms.lookup(0x5555_0000), None);
        assert_eq!(syms.lookup(0), None);
    }

    #[test]
    fn addresses_hidden_as_zero_are_an_error_that_says_so() {
        let hidden = "\
0000000000000000 T _stext
0000000000000000 T ip_forward
0000000000000000 t veth_xmit\t[veth]
";
        let e = KernelSymbols::parse(hidden).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("reads 0"), "{e}");
        assert!(KernelSymbols::parse("").is_err());
    }
}
