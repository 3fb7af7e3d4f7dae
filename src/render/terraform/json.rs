//! The same body in Terraform's JSON syntax (`.tf.json`), for pipelines that prefer to read or
//! patch JSON. Strings are still templates there, so `${` and `%{` are doubled as in HCL;
//! references become `"${…}"`; comments become `"//"` properties, which Terraform ignores.

use serde_json::{Map, Value as Json};

use super::hcl::{Block, Item, Value, escape_interpolation};

/// Pretty-printed JSON with a final newline.
pub fn to_string(items: &[Item]) -> String {
    let mut text = serde_json::to_string_pretty(&body(items)).unwrap_or_default();
    text.push('\n');
    text
}

/// Comments right above a block go into the block's `"//"`; the others (a file header, notes)
/// into this body's own `"//"`.
fn body(items: &[Item]) -> Json {
    let mut map = Map::new();
    let mut pending: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for item in items {
        match item {
            Item::Attr(key, value) => {
                map.insert(key.clone(), value_json(value, key == "providers"));
            }
            Item::Comment(text) => pending.push(text.clone()),
            Item::Blank => notes.append(&mut pending),
            Item::Block(b) => {
                let mut inner = body(&b.body);
                if let (Json::Object(o), false) = (&mut inner, pending.is_empty()) {
                    o.insert("//".into(), Json::String(pending.join("\n")));
                }
                pending.clear();
                insert_block(&mut map, b, inner);
            }
        }
    }
    notes.append(&mut pending);
    if !notes.is_empty() {
        map.insert("//".into(), Json::String(notes.join("\n")));
    }
    Json::Object(map)
}

/// `{"module": {"name": {...}}}`; `provider` blocks are lists (several aliases of one provider).
fn insert_block(map: &mut Map<String, Json>, b: &Block, inner: Json) {
    if b.ident == "provider" {
        let by_name = map
            .entry(b.ident.clone())
            .or_insert_with(|| Json::Object(Map::new()));
        if let (Json::Object(o), Some(name)) = (by_name, b.labels.first()) {
            let list = o
                .entry(name.clone())
                .or_insert_with(|| Json::Array(Vec::new()));
            if let Json::Array(a) = list {
                a.push(inner);
            }
        }
        return;
    }
    let mut slot = map
        .entry(b.ident.clone())
        .or_insert_with(|| Json::Object(Map::new()));
    if b.labels.is_empty() {
        if let (Json::Object(target), Json::Object(source)) = (slot, inner) {
            target.extend(source);
        }
        return;
    }
    for (i, label) in b.labels.iter().enumerate() {
        let Json::Object(o) = slot else { return };
        let last = i + 1 == b.labels.len();
        slot = o
            .entry(label.clone())
            .or_insert_with(|| Json::Object(Map::new()));
        if last {
            *slot = inner;
            return;
        }
    }
}

/// `raw_refs`: where Terraform's JSON syntax takes a bare reference string (`providers`).
fn value_json(value: &Value, raw_refs: bool) -> Json {
    match value {
        Value::Str(s) => Json::String(escape_interpolation(s)),
        Value::Int(n) => Json::from(*n),
        Value::Money(x) => super::hcl::money(*x)
            .parse::<serde_json::Number>()
            .map(Json::Number)
            .unwrap_or(Json::Null),
        Value::Bool(b) => Json::Bool(*b),
        Value::Ref(r) if r == "null" => Json::Null,
        Value::Ref(r) if raw_refs => Json::String(r.clone()),
        Value::Ref(r) => Json::String(format!("${{{r}}}")),
        Value::Type(t) => Json::String(t.clone()),
        Value::List(items) => Json::Array(items.iter().map(|v| value_json(v, raw_refs)).collect()),
        Value::Object(entries) => Json::Object(
            entries
                .iter()
                .map(|(k, v)| (k.clone(), value_json(v, raw_refs)))
                .collect(),
        ),
    }
}
