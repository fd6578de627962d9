//! The demo CRM in `fixtures/demo`: it validates clean, and the inheritance and reference
//! questions give the answers the planner and the query compiler rely on.

use hf_model::{files, validate, Model, QualifiedName, Reference, ReferenceKind, Target};

fn demo() -> Model {
    files::load_dir(&super::fixtures_dir().join("demo")).unwrap()
}

fn name(object: &str) -> QualifiedName {
    QualifiedName::new("crm", object)
}

#[test]
fn demo_validates_clean() {
    let model = demo();
    assert_eq!(validate(&model), vec![]);
    let crm = model.module("crm").unwrap();
    assert_eq!(crm.identity.color.as_deref(), Some("indigo"));
    assert_eq!(crm.identity.icon.as_deref(), Some("briefcase"));
    let keys: Vec<&str> = crm.objects.keys().map(String::as_str).collect();
    assert_eq!(keys, ["account", "contact", "opportunity", "party"]);
    assert!(crm.objects["party"].is_abstract);
    assert_eq!(crm.screens["counter"].hfx_source.lines().count(), 2);
}

#[test]
fn effective_fields_list_inherited_fields_first() {
    let model = demo();
    let fields: Vec<String> = model
        .effective_fields(&name("account"))
        .iter()
        .map(|f| format!("{}.{}", f.declared_on, f.field.key))
        .collect();
    assert_eq!(
        fields,
        [
            "crm.party.email",
            "crm.party.name",
            "crm.party.phone",
            "crm.account.industry",
            "crm.account.opportunity_count",
            "crm.account.pipeline_amount",
            "crm.account.website",
            "crm.account.won_amount",
        ]
    );
    let rules: Vec<String> = model
        .effective_rules(&name("contact"))
        .iter()
        .map(|r| format!("{}.{}", r.declared_on, r.key))
        .collect();
    assert_eq!(rules, ["crm.party.name_not_blank"]);
}

#[test]
fn ancestors_and_subtypes() {
    let model = demo();
    assert_eq!(model.ancestors(&name("account")), vec![name("party")]);
    assert_eq!(model.ancestors(&name("party")), vec![]);
    assert_eq!(
        model.concrete_subtypes(&name("party")),
        vec![name("account"), name("contact")]
    );
    assert_eq!(model.concrete_subtypes(&name("account")), vec![]);
    assert_eq!(
        model.subtypes(&name("party")),
        vec![name("account"), name("contact")]
    );
}

#[test]
fn references_to_an_object() {
    let model = demo();
    let lookups: Vec<String> = model
        .lookups_targeting(&name("account"))
        .iter()
        .map(|f| format!("{}.{}", f.declared_on, f.field.key))
        .collect();
    assert_eq!(lookups, ["crm.contact.account", "crm.opportunity.account"]);

    assert_eq!(
        model.referrers(&name("party")),
        vec![
            Reference {
                referrer: Target::object(&name("account")),
                kind: ReferenceKind::Extends
            },
            Reference {
                referrer: Target::object(&name("contact")),
                kind: ReferenceKind::Extends
            },
        ]
    );
    let rollups: Vec<String> = model
        .referrers(&name("opportunity"))
        .iter()
        .map(|r| format!("{} {:?}", r.referrer, r.kind))
        .collect();
    assert_eq!(
        rollups,
        [
            "crm.account.opportunity_count RollupSource",
            "crm.account.pipeline_amount RollupSource",
            "crm.account.won_amount RollupSource",
        ]
    );
    let users: Vec<String> = model
        .field_referrers(&name("opportunity"), "amount")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        users,
        [
            "crm.account.pipeline_amount",
            "crm.account.won_amount",
            "crm.opportunity.rules.amount_non_negative",
        ]
    );
}
