//! Reading a fate file: every field checked, every failure named by offset and field.

use super::{DirectionHeader, FateFile, FlowId, FormatError, FrameRecord, Header, Recorded};
use super::{MAGIC, TAG_END, TAG_FRAME, VERSION};
use crate::DropCause;

/// A cursor over a fate file's bytes that names what it fails to read.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn fail<T>(
        &self,
        offset: usize,
        field: &str,
        problem: impl Into<String>,
    ) -> Result<T, FormatError> {
        Err(FormatError {
            offset,
            field: field.to_string(),
            problem: problem.into(),
        })
    }

    fn byte(&mut self, field: &str) -> Result<u8, FormatError> {
        match self.bytes.get(self.at) {
            Some(&b) => {
                self.at += 1;
                Ok(b)
            }
            None => self.fail(self.at, field, "the file ends here (truncated)"),
        }
    }

    fn varint(&mut self, field: &str) -> Result<u64, FormatError> {
        let start = self.at;
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.byte(field)?;
            let bits = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return self.fail(start, field, "varint longer than 64 bits");
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        self.fail(start, field, "varint longer than 10 bytes")
    }

    fn bounded(&mut self, field: &str, max: u64) -> Result<u64, FormatError> {
        let start = self.at;
        let v = self.varint(field)?;
        if v > max {
            return self.fail(start, field, format!("{v} is above {max}"));
        }
        Ok(v)
    }

    fn string(&mut self, field: &str) -> Result<String, FormatError> {
        let start = self.at;
        let len = self.bounded(field, 4096)? as usize;
        let Some(bytes) = self.bytes.get(self.at..self.at + len) else {
            return self.fail(start, field, "the file ends inside the text (truncated)");
        };
        self.at += len;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => self.fail(start, field, "not UTF-8"),
        }
    }
}

impl FateFile {
    /// Reads a whole fate file. Never panics, whatever the bytes.
    pub fn parse(bytes: &[u8]) -> Result<FateFile, FormatError> {
        let mut r = Reader { bytes, at: 0 };
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return r.fail(0, "magic", "not a latlab fate file (it starts otherwise)");
        }
        r.at = MAGIC.len();
        let version = r.byte("version")?;
        if version != VERSION {
            return r.fail(
                MAGIC.len(),
                "version",
                format!("version {version}; this latlab reads version {VERSION}"),
            );
        }
        let n = r.bounded("directions", 16)?;
        let mut directions = Vec::new();
        for i in 0..n {
            let name = r.string(&format!("directions[{i}].name"))?;
            let rules_n = r.bounded(&format!("directions[{i}].rules"), 1024)?;
            let mut rules = Vec::new();
            for j in 0..rules_n {
                rules.push(r.string(&format!("directions[{i}].rules[{j}]"))?);
            }
            directions.push(DirectionHeader { name, rules });
        }
        let mut frames = Vec::new();
        loop {
            let at = r.at;
            let field = format!("record {}", frames.len());
            match r.byte(&format!("{field} tag (no trailer)"))? {
                TAG_FRAME => frames.push(read_frame(&mut r, &field, directions.len())?),
                TAG_END => {
                    let count_at = r.at;
                    let count = r.varint("trailer frames")?;
                    if count != frames.len() as u64 {
                        return r.fail(
                            count_at,
                            "trailer frames",
                            format!("says {count} frames, the file holds {}", frames.len()),
                        );
                    }
                    let unqueued = r.varint("trailer unqueued")?;
                    if r.at != bytes.len() {
                        return r.fail(r.at, "trailer", "bytes after the end of the file");
                    }
                    let header = Header { directions };
                    return Ok(FateFile {
                        header,
                        frames,
                        unqueued,
                    });
                }
                tag => return r.fail(at, &format!("{field} tag"), format!("unknown tag {tag}")),
            }
        }
    }
}

fn read_frame(
    r: &mut Reader<'_>,
    field: &str,
    directions: usize,
) -> Result<FrameRecord, FormatError> {
    let at = r.at;
    let direction = r.byte(&format!("{field} direction"))?;
    if usize::from(direction) >= directions {
        return r.fail(
            at,
            &format!("{field} direction"),
            format!("{direction}, and the header has {directions} directions"),
        );
    }
    let ethertype = r.bounded(&format!("{field} ethertype"), 0xffff)? as u16;
    let protocol = match r.bounded(&format!("{field} protocol"), 256)? {
        0 => None,
        p => Some((p - 1) as u8),
    };
    let number = r.bounded(&format!("{field} flow number"), u64::from(u32::MAX))? as u32;
    let position = r.varint(&format!("{field} position"))?;
    let arrival_ns = r.varint(&format!("{field} arrival"))?;
    let len = r.bounded(&format!("{field} length"), u64::from(u32::MAX))? as u32;
    let at = r.at;
    let fate = match r.byte(&format!("{field} outcome"))? {
        0 => {
            let flags_at = r.at;
            let flags = r.byte(&format!("{field} flags"))?;
            if flags & !7 != 0 {
                return r.fail(
                    flags_at,
                    &format!("{field} flags"),
                    format!("unknown flags {flags:#x}"),
                );
            }
            let transit_ns = r.varint(&format!("{field} transit"))?;
            let duplicate_transit_ns = match flags & 1 {
                0 => None,
                _ => Some(r.varint(&format!("{field} duplicate transit"))?),
            };
            let corrupt_bit = match flags & 2 {
                0 => None,
                _ => Some(r.varint(&format!("{field} corrupted bit"))?),
            };
            Recorded::Deliver {
                transit_ns,
                duplicate_transit_ns,
                corrupt_bit,
                reordered: flags & 4 != 0,
            }
        }
        1 => Recorded::Drop(DropCause::Loss),
        2 => Recorded::Drop(DropCause::QueueFrames),
        3 => Recorded::Drop(DropCause::QueueBytes),
        4 => Recorded::Drop(DropCause::Runt),
        5 => Recorded::Drop(DropCause::Oversized),
        6 => Recorded::Drop(DropCause::Outage),
        other => {
            return r.fail(
                at,
                &format!("{field} outcome"),
                format!("unknown outcome {other}"),
            )
        }
    };
    Ok(FrameRecord {
        direction,
        flow: FlowId {
            ethertype,
            protocol,
            number,
        },
        position,
        arrival_ns,
        len,
        fate,
    })
}
