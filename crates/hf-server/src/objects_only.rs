//! A serde `Deserializer` wrapper under which a Rust struct is read only from a JSON object.
//!
//! serde's derived structs also accept a JSON array, its items taken as the fields in order:
//! `PATCH /iam/principals/{id}` with the body `[true]` was read as `{"isAdmin": true}`, and
//! `"identity": ["teal", "user"]` as a colour and an icon. The interface document says objects,
//! so a client's array is a mistake (or a probe) to refuse, not a shape to guess at. serde has
//! no switch for this and no crate offers one, hence this wrapper: it passes everything through
//! to the deserializer it wraps, wrapping in turn every nested deserializer, except that it asks
//! for a map wherever a struct is wanted, which a JSON array is not.
//!
//! Not covered: structs inside internally tagged or untagged enums (serde buffers those and
//! reads them without the deserializer), and struct variants of enums.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

/// Wraps `D` so that structs are read only from maps (JSON objects).
pub struct ObjectsOnly<D>(pub D);

/// Forwards `deserialize_*` methods to the wrapped deserializer with the visitor wrapped.
macro_rules! forward {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
            self.0.$method(Wrapped(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectsOnly<D> {
    type Error = D::Error;

    forward! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, Wrapped(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_newtype_struct(name, Wrapped(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple(len, Wrapped(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrapped(visitor))
    }

    /// The one change: a struct is asked for as a map, so an array is an invalid type
    /// ("invalid type: sequence, expected struct …").
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_map(Wrapped(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, Wrapped(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

/// A visitor whose nested deserializers, sequences, maps and enums are wrapped too.
struct Wrapped<V>(V);

/// Forwards `visit_*` methods that take a plain value.
macro_rules! forward_values {
    ($($method:ident($ty:ty))*) => {$(
        fn $method<E: de::Error>(self, value: $ty) -> Result<Self::Value, E> {
            self.0.$method(value)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrapped<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(formatter)
    }

    forward_values! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_f64(f64) visit_char(char) visit_str(&str)
        visit_borrowed_str(&'de str) visit_string(String) visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(ObjectsOnly(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(ObjectsOnly(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(ObjectsOnly(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(ObjectsOnly(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(ObjectsOnly(data))
    }
}

/// A seed whose deserializer is wrapped.
struct Seed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(ObjectsOnly(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for ObjectsOnly<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for ObjectsOnly<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Seed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Seed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for ObjectsOnly<A> {
    type Error = A::Error;
    type Variant = ObjectsOnly<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(Seed(seed))?;
        Ok((value, ObjectsOnly(variant)))
    }
}

impl<'de, A: de::VariantAccess<'de>> de::VariantAccess<'de> for ObjectsOnly<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Seed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrapped(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Wrapped(visitor))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        color: Option<String>,
        icon: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Outer {
        label: String,
        identity: Option<Inner>,
        tags: Vec<String>,
        #[serde(default)]
        kind: Option<Kind>,
        raw: Option<Box<serde_json::value::RawValue>>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase")]
    enum Kind {
        Plain,
        Tagged(Inner),
    }

    fn read<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, serde_json::Error> {
        let mut json = serde_json::Deserializer::from_str(text);
        T::deserialize(ObjectsOnly(&mut json))
    }

    #[test]
    fn objects_are_read_as_before() {
        let outer: Outer = read(
            r#"{"label":"A","identity":{"color":"teal","icon":null},"tags":["x"],
                "kind":{"tagged":{"color":null,"icon":"i"}},"raw":{"exact":1.10}}"#,
        )
        .unwrap();
        assert_eq!(outer.label, "A");
        assert_eq!(outer.identity.unwrap().color.as_deref(), Some("teal"));
        assert_eq!(outer.tags, ["x"]);
        assert!(matches!(outer.kind, Some(Kind::Tagged(_))));
        assert_eq!(outer.raw.unwrap().get(), r#"{"exact":1.10}"#);
        let plain: Outer =
            read(r#"{"label":"B","identity":null,"tags":[],"kind":"plain"}"#).unwrap();
        assert_eq!(plain.kind, Some(Kind::Plain));
    }

    #[test]
    fn arrays_are_not_structs() {
        let error = read::<Outer>(r#"["A", null, []]"#).unwrap_err();
        assert!(
            error.to_string().contains("expected struct Outer"),
            "{error}"
        );
        let error =
            read::<Outer>(r#"{"label":"A","identity":["teal","user"],"tags":[]}"#).unwrap_err();
        assert!(
            error.to_string().contains("expected struct Inner"),
            "{error}"
        );
        let error =
            read::<Outer>(r#"{"label":"A","tags":[],"kind":{"tagged":[null,"i"]}}"#).unwrap_err();
        assert!(
            error.to_string().contains("expected struct Inner"),
            "{error}"
        );
        // Without the wrapper serde takes the array positionally.
        let positional: Inner = serde_json::from_str(r#"["teal","user"]"#).unwrap();
        assert_eq!(positional.icon.as_deref(), Some("user"));
    }
}
