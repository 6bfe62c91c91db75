//! Sector sizes and the registered proof types that name a proof's
//! configuration (filecoin-proofs-api's names and numbering).

use std::fmt;
use std::str::FromStr;

use filecoin_proofs::constants::{
    SECTOR_SIZE_1_GIB, SECTOR_SIZE_2_KIB, SECTOR_SIZE_4_KIB, SECTOR_SIZE_8_MIB, SECTOR_SIZE_16_KIB,
    SECTOR_SIZE_16_MIB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_64_GIB, SECTOR_SIZE_512_MIB,
    SUPPORTED_SECTOR_SIZES,
};
use filecoin_proofs::{PoRepConfig, PoStConfig, PoStType};
use storage_proofs_core::api_version::{ApiFeature, ApiVersion};

use crate::error::{FilecoinError, Result};

/// A sector size that filecoin-proofs supports (2 KiB ... 64 GiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SectorSize(u64);

/// The merkle tree shape of a sector size: which `Tree` type its proofs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// 2 KiB, 8 MiB, 512 MiB.
    Base,
    /// 4 KiB, 16 MiB, 1 GiB.
    Sub2,
    /// 16 KiB, 32 GiB.
    Sub8,
    /// 32 KiB, 64 GiB.
    Top2,
}

impl SectorSize {
    pub const KIB2: SectorSize = SectorSize(SECTOR_SIZE_2_KIB);
    pub const MIB8: SectorSize = SectorSize(SECTOR_SIZE_8_MIB);
    pub const MIB512: SectorSize = SectorSize(SECTOR_SIZE_512_MIB);
    pub const GIB32: SectorSize = SectorSize(SECTOR_SIZE_32_GIB);
    pub const GIB64: SectorSize = SectorSize(SECTOR_SIZE_64_GIB);

    /// `bytes` if filecoin-proofs supports it.
    pub fn new(bytes: u64) -> Result<SectorSize> {
        if SUPPORTED_SECTOR_SIZES.contains(&bytes) {
            Ok(SectorSize(bytes))
        } else {
            Err(FilecoinError::UnknownSectorSize(bytes))
        }
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// Nodes (32-byte leaves) of the sector.
    pub fn nodes(self) -> u64 {
        self.0 / 32
    }

    pub fn shape(self) -> Shape {
        match self.0 {
            SECTOR_SIZE_2_KIB | SECTOR_SIZE_8_MIB | SECTOR_SIZE_512_MIB => Shape::Base,
            SECTOR_SIZE_4_KIB | SECTOR_SIZE_16_MIB | SECTOR_SIZE_1_GIB => Shape::Sub2,
            SECTOR_SIZE_16_KIB | SECTOR_SIZE_32_GIB => Shape::Sub8,
            _ => Shape::Top2,
        }
    }

    /// filecoin-proofs' name part ("2KiB", "32GiB").
    pub fn name(self) -> String {
        let b = self.0;
        if b >= 1 << 30 {
            format!("{}GiB", b >> 30)
        } else if b >= 1 << 20 {
            format!("{}MiB", b >> 20)
        } else {
            format!("{}KiB", b >> 10)
        }
    }
}

impl fmt::Display for SectorSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for SectorSize {
    type Err = FilecoinError;

    /// "2KiB", "32GiB" or a number of bytes.
    fn from_str(s: &str) -> Result<SectorSize> {
        let t = s.trim();
        if let Ok(bytes) = t.parse::<u64>() {
            return SectorSize::new(bytes);
        }
        SUPPORTED_SECTOR_SIZES
            .iter()
            .map(|&b| SectorSize(b))
            .find(|size| size.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| FilecoinError::BadInput {
                what: "sector size",
                detail: format!("`{s}` is not one of 2KiB, 8MiB, 512MiB, 32GiB, 64GiB (or bytes)"),
            })
    }
}

/// The published sector sizes, in registration order.
const PUBLISHED: [u64; 5] = [
    SECTOR_SIZE_2_KIB,
    SECTOR_SIZE_8_MIB,
    SECTOR_SIZE_512_MIB,
    SECTOR_SIZE_32_GIB,
    SECTOR_SIZE_64_GIB,
];

/// PoRep variants, in filecoin-proofs-api's order (`RegisteredSealProof`
/// numbers = 5 x variant + size index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealVersion {
    V1,
    V1_1,
    V1_1SyntheticPoRep,
    V1_2NonInteractivePoRep,
}

const SEAL_VERSIONS: [(SealVersion, &str); 4] = [
    (SealVersion::V1, "V1"),
    (SealVersion::V1_1, "V1_1"),
    (SealVersion::V1_1SyntheticPoRep, "V1_1_Feat_SyntheticPoRep"),
    (
        SealVersion::V1_2NonInteractivePoRep,
        "V1_2_Feat_NonInteractivePoRep",
    ),
];

/// A registered seal (PoRep) proof such as `StackedDrg2KiBV1_1`: a sector
/// size and a version, which fix the porep id, the API version and features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealProof {
    pub sector_size: SectorSize,
    pub version: SealVersion,
}

impl SealProof {
    /// The default for a sector size today: `StackedDrg<size>V1_1`.
    pub fn v1_1(sector_size: SectorSize) -> SealProof {
        SealProof {
            sector_size,
            version: SealVersion::V1_1,
        }
    }

    /// filecoin-proofs-api's number of this proof; `None` for sector sizes
    /// that are not published (test sizes such as 4 KiB).
    pub fn registered_id(self) -> Option<u64> {
        let size = PUBLISHED.iter().position(|&b| b == self.sector_size.0)?;
        let version = SEAL_VERSIONS.iter().position(|(v, _)| *v == self.version)?;
        Some((version * PUBLISHED.len() + size) as u64)
    }

    /// The porep id: the registered number, little endian, then a zero
    /// nonce. Unpublished sizes use the id of the 2 KiB proof of the same
    /// version (the id only seeds the graph, never the parameters).
    pub fn porep_id(self) -> [u8; 32] {
        let id = self.registered_id().unwrap_or_else(|| {
            SealProof {
                sector_size: SectorSize::KIB2,
                version: self.version,
            }
            .registered_id()
            .unwrap_or(0)
        });
        let mut porep_id = [0u8; 32];
        porep_id[..8].copy_from_slice(&id.to_le_bytes());
        porep_id
    }

    /// The filecoin-proofs configuration of this proof.
    pub fn config(self) -> Result<PoRepConfig> {
        let (api, features) = match self.version {
            SealVersion::V1 => (ApiVersion::V1_0_0, vec![]),
            SealVersion::V1_1 => (ApiVersion::V1_1_0, vec![]),
            SealVersion::V1_1SyntheticPoRep => {
                (ApiVersion::V1_2_0, vec![ApiFeature::SyntheticPoRep])
            }
            SealVersion::V1_2NonInteractivePoRep => {
                (ApiVersion::V1_2_0, vec![ApiFeature::NonInteractivePoRep])
            }
        };
        // `new_groth16` panics on an unknown size; `SectorSize` is known.
        PoRepConfig::new_groth16_with_features(
            self.sector_size.bytes(),
            self.porep_id(),
            api,
            features,
        )
        .map_err(FilecoinError::proofs("PoRep configuration"))
    }
}

impl fmt::Display for SealProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = SEAL_VERSIONS
            .iter()
            .find(|(v, _)| *v == self.version)
            .map_or("?", |(_, n)| n);
        write!(f, "StackedDrg{}{}", self.sector_size, version)
    }
}

impl FromStr for SealProof {
    type Err = FilecoinError;

    /// `StackedDrg2KiBV1_1` and the like.
    fn from_str(s: &str) -> Result<SealProof> {
        let unknown = || FilecoinError::UnknownProof {
            name: s.to_owned(),
            examples: "StackedDrg2KiBV1_1, StackedDrg32GiBV1_1_Feat_SyntheticPoRep",
        };
        let rest = s.strip_prefix("StackedDrg").ok_or_else(unknown)?;
        let split = rest.find("iB").ok_or_else(unknown)? + 2;
        let sector_size: SectorSize = rest[..split].parse().map_err(|_| unknown())?;
        let version = SEAL_VERSIONS
            .iter()
            .find(|(_, n)| *n == &rest[split..])
            .map(|(v, _)| *v)
            .ok_or_else(unknown)?;
        Ok(SealProof {
            sector_size,
            version,
        })
    }
}

/// Which PoSt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostKind {
    Winning,
    Window,
}

/// A registered PoSt proof such as `StackedDrgWinning2KiBV1` or
/// `StackedDrgWindow32GiBV1_1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostProof {
    pub kind: PostKind,
    pub sector_size: SectorSize,
    pub api_version: ApiVersion,
}

impl PostProof {
    /// The filecoin-proofs configuration of this proof.
    pub fn config(self) -> PoStConfig {
        let size = self.sector_size.bytes();
        let (typ, challenge_count, sector_count) = match self.kind {
            PostKind::Winning => (
                PoStType::Winning,
                filecoin_proofs::WINNING_POST_CHALLENGE_COUNT,
                filecoin_proofs::WINNING_POST_SECTOR_COUNT,
            ),
            PostKind::Window => (
                PoStType::Window,
                filecoin_proofs::WINDOW_POST_CHALLENGE_COUNT,
                filecoin_proofs::WINDOW_POST_SECTOR_COUNT
                    .read()
                    .map(|m| m.get(&size).copied().unwrap_or(2))
                    .unwrap_or(2),
            ),
        };
        PoStConfig {
            sector_size: filecoin_proofs::SectorSize(size),
            challenge_count,
            sector_count,
            typ,
            priority: true,
            api_version: self.api_version,
        }
    }
}

impl fmt::Display for PostProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            PostKind::Winning => "Winning",
            PostKind::Window => "Window",
        };
        let version = match self.api_version {
            ApiVersion::V1_0_0 => "V1",
            ApiVersion::V1_1_0 => "V1_1",
            ApiVersion::V1_2_0 => "V1_2",
        };
        write!(f, "StackedDrg{kind}{}{version}", self.sector_size)
    }
}

impl FromStr for PostProof {
    type Err = FilecoinError;

    fn from_str(s: &str) -> Result<PostProof> {
        let unknown = || FilecoinError::UnknownProof {
            name: s.to_owned(),
            examples: "StackedDrgWinning2KiBV1, StackedDrgWindow32GiBV1_1",
        };
        let rest = s.strip_prefix("StackedDrg").ok_or_else(unknown)?;
        let (kind, rest) = if let Some(r) = rest.strip_prefix("Winning") {
            (PostKind::Winning, r)
        } else if let Some(r) = rest.strip_prefix("Window") {
            (PostKind::Window, r)
        } else {
            return Err(unknown());
        };
        let split = rest.find("iB").ok_or_else(unknown)? + 2;
        let sector_size: SectorSize = rest[..split].parse().map_err(|_| unknown())?;
        let api_version = match &rest[split..] {
            "V1" => ApiVersion::V1_0_0,
            "V1_1" => ApiVersion::V1_1_0,
            "V1_2" => ApiVersion::V1_2_0,
            _ => return Err(unknown()),
        };
        Ok(PostProof {
            kind,
            sector_size,
            api_version,
        })
    }
}

/// A registered SnapDeals (empty sector update) proof such as
/// `StackedDrg2KiBV1` (filecoin-proofs-api's `RegisteredUpdateProof`): one
/// per sector size, API version 1.2, no features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpdateProof {
    sector_size: SectorSize,
}

impl UpdateProof {
    /// The update proof of `sector_size`; sizes without an update circuit
    /// in storage-proofs-update (1 GiB) are refused.
    pub fn new(sector_size: SectorSize) -> Result<UpdateProof> {
        if sector_size.0 == SECTOR_SIZE_1_GIB {
            return Err(FilecoinError::BadInput {
                what: "sector size",
                detail: "storage-proofs-update has no SnapDeals circuit for 1GiB sectors".into(),
            });
        }
        Ok(UpdateProof { sector_size })
    }

    pub fn sector_size(self) -> SectorSize {
        self.sector_size
    }

    /// filecoin-proofs-api's number of this proof (`StackedDrg2KiBV1` is 0);
    /// `None` for sector sizes that are not published.
    pub fn registered_id(self) -> Option<u64> {
        PUBLISHED
            .iter()
            .position(|&b| b == self.sector_size.0)
            .map(|i| i as u64)
    }

    /// The PoRep configuration filecoin-proofs-api's `as_v1_config` gives
    /// this proof; of it, the update proof uses only the sector size.
    pub fn config(self) -> Result<PoRepConfig> {
        let mut porep_id = [0u8; 32];
        porep_id[..8].copy_from_slice(&self.registered_id().unwrap_or(0).to_le_bytes());
        PoRepConfig::new_groth16_with_features(
            self.sector_size.bytes(),
            porep_id,
            ApiVersion::V1_2_0,
            vec![],
        )
        .map_err(FilecoinError::proofs("SnapDeals configuration"))
    }
}

impl fmt::Display for UpdateProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StackedDrg{}V1", self.sector_size)
    }
}

impl FromStr for UpdateProof {
    type Err = FilecoinError;

    /// `StackedDrg2KiBV1`, `StackedDrg32GiBV1`.
    fn from_str(s: &str) -> Result<UpdateProof> {
        let unknown = || FilecoinError::UnknownProof {
            name: s.to_owned(),
            examples: "StackedDrg2KiBV1, StackedDrg32GiBV1 (SnapDeals update proofs)",
        };
        let rest = s.strip_prefix("StackedDrg").ok_or_else(unknown)?;
        let size = rest.strip_suffix("V1").ok_or_else(unknown)?;
        if !size.ends_with("iB") {
            return Err(unknown());
        }
        UpdateProof::new(size.parse().map_err(|_| unknown())?)
    }
}

/// The sector size a vanilla proof was made for, read from one of its
/// inclusion paths in a binary tree over the sector's 32-byte nodes (comm_d's
/// tree, TreeD): such a path has log2(nodes) levels. `first` is the first
/// proof of the request (`None` when it holds none), `pointer` the JSON
/// pointer to the path's list of levels, `tree` the tree's name in errors.
pub(crate) fn sector_size_from_path(
    what: &'static str,
    first: Option<&serde_json::Value>,
    pointer: &str,
    tree: &str,
) -> Result<SectorSize> {
    let bad = |detail: String| FilecoinError::BadInput { what, detail };
    let first = first.ok_or_else(|| bad("`vanilla_proofs` holds no proofs".to_owned()))?;
    let levels = first
        .pointer(pointer)
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| {
            bad(format!(
                "its first vanilla proof has no {tree} inclusion path"
            ))
        })?
        .len();
    if levels == 0 || levels > 40 {
        return Err(bad(format!(
            "its {tree} inclusion path has {levels} levels"
        )));
    }
    SectorSize::new(32u64 << levels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_seal_proofs_round_trip_with_filecoin_numbers() {
        let p: SealProof = "StackedDrg2KiBV1_1".parse().unwrap();
        assert_eq!(p, SealProof::v1_1(SectorSize::KIB2));
        assert_eq!(p.registered_id(), Some(5));
        assert_eq!(p.porep_id()[..8], 5u64.to_le_bytes());
        assert_eq!(p.to_string(), "StackedDrg2KiBV1_1");
        let p: SealProof = "StackedDrg32GiBV1_1_Feat_SyntheticPoRep".parse().unwrap();
        assert_eq!(p.registered_id(), Some(13));
        assert_eq!(p.to_string(), "StackedDrg32GiBV1_1_Feat_SyntheticPoRep");
        let p: SealProof = "StackedDrg64GiBV1_2_Feat_NonInteractivePoRep"
            .parse()
            .unwrap();
        assert_eq!(p.registered_id(), Some(19));
        for bad in ["StackedDrg3KiBV1_1", "StackedDrg2KiBV9", "2KiB", ""] {
            let e = bad.parse::<SealProof>().unwrap_err();
            assert!(e.to_string().contains("unknown registered proof"), "{e}");
        }
    }

    #[test]
    fn sector_sizes_parse_by_name_or_bytes() {
        assert_eq!("2KiB".parse::<SectorSize>().unwrap(), SectorSize::KIB2);
        assert_eq!("32gib".parse::<SectorSize>().unwrap(), SectorSize::GIB32);
        assert_eq!("2048".parse::<SectorSize>().unwrap(), SectorSize::KIB2);
        assert_eq!(SectorSize::new(1 << 36).unwrap().to_string(), "64GiB");
        assert!(matches!(
            SectorSize::new(3000),
            Err(FilecoinError::UnknownSectorSize(3000))
        ));
        assert!("3KiB".parse::<SectorSize>().is_err());
    }

    #[test]
    fn registered_post_proofs_round_trip() {
        let p: PostProof = "StackedDrgWindow32GiBV1_1".parse().unwrap();
        assert_eq!(
            (p.kind, p.sector_size, p.api_version),
            (PostKind::Window, SectorSize::GIB32, ApiVersion::V1_1_0)
        );
        assert_eq!(p.to_string(), "StackedDrgWindow32GiBV1_1");
        assert_eq!(p.config().sector_count, 2349);
        let p: PostProof = "StackedDrgWinning2KiBV1".parse().unwrap();
        assert_eq!(p.config().challenge_count, 66);
        assert!("StackedDrgLosing2KiBV1".parse::<PostProof>().is_err());
    }

    #[test]
    fn registered_update_proofs_round_trip_with_filecoin_numbers() {
        let p: UpdateProof = "StackedDrg2KiBV1".parse().unwrap();
        assert_eq!(p.sector_size(), SectorSize::KIB2);
        assert_eq!(
            (p.registered_id(), p.to_string().as_str()),
            (Some(0), "StackedDrg2KiBV1")
        );
        let p: UpdateProof = "StackedDrg64GiBV1".parse().unwrap();
        assert_eq!(p.registered_id(), Some(4));
        let config = p.config().unwrap();
        assert_eq!(config.porep_id[..8], 4u64.to_le_bytes());
        assert_eq!(config.api_version, ApiVersion::V1_2_0);
        for bad in [
            "StackedDrg2KiBV1_1",
            "StackedDrg3KiBV1",
            "StackedDrgV1",
            "2KiB",
        ] {
            let e = bad.parse::<UpdateProof>().unwrap_err();
            assert!(e.to_string().contains("unknown registered proof"), "{e}");
        }
        let e = "StackedDrg1GiBV1".parse::<UpdateProof>().unwrap_err();
        assert!(
            e.to_string().contains("no SnapDeals circuit for 1GiB"),
            "{e}"
        );
    }
}
