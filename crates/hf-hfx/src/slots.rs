//! [`SlotSet`]: the state slots a piece of code depends on or writes.

use smallvec::SmallVec;

/// A set of state slots, kept sorted, iterated in increasing order (as a `BTreeSet` would be).
///
/// Every dynamic piece of markup has one or two of these, and they hold a few slots each: kept
/// in place (up to eight, which a function reading much of the state reaches; sixteen measured
/// slower, the sets being moved around) in a sorted array, they cost no allocation and no tree,
/// which a `BTreeSet` per piece did (an allocation to make, a walk to drop).
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub(crate) struct SlotSet(SmallVec<[usize; 8]>);

impl SlotSet {
    pub(crate) fn new() -> SlotSet {
        SlotSet(SmallVec::new())
    }

    /// Adds `slot`; `false` when it was already there.
    pub(crate) fn insert(&mut self, slot: usize) -> bool {
        match self.0.binary_search(&slot) {
            Ok(_) => false,
            Err(at) => {
                self.0.insert(at, slot);
                true
            }
        }
    }

    pub(crate) fn contains(&self, slot: &usize) -> bool {
        self.0.binary_search(slot).is_ok()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every slot of `other`. Into an empty set (the common case: an expression's first
    /// name), a copy, since `other` is already sorted.
    pub(crate) fn union(&mut self, other: &SlotSet) {
        if self.0.is_empty() {
            self.0.extend_from_slice(&other.0);
        } else {
            for &slot in other {
                self.insert(slot);
            }
        }
    }

    /// The slots in increasing order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, usize> {
        self.0.iter()
    }

    /// The slots in increasing order, as a slice (`[slot]` matches a set of one).
    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.0
    }
}

impl<const N: usize> From<[usize; N]> for SlotSet {
    fn from(slots: [usize; N]) -> SlotSet {
        slots.into_iter().collect()
    }
}

impl Extend<usize> for SlotSet {
    fn extend<I: IntoIterator<Item = usize>>(&mut self, slots: I) {
        for slot in slots {
            self.insert(slot);
        }
    }
}

impl<'s> Extend<&'s usize> for SlotSet {
    fn extend<I: IntoIterator<Item = &'s usize>>(&mut self, slots: I) {
        self.extend(slots.into_iter().copied());
    }
}

impl FromIterator<usize> for SlotSet {
    fn from_iter<I: IntoIterator<Item = usize>>(slots: I) -> SlotSet {
        let mut set = SlotSet::new();
        set.extend(slots);
        set
    }
}

impl IntoIterator for SlotSet {
    type Item = usize;
    type IntoIter = smallvec::IntoIter<[usize; 8]>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'s> IntoIterator for &'s SlotSet {
    type Item = &'s usize;
    type IntoIter = std::slice::Iter<'s, usize>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::SlotSet;

    #[test]
    fn a_slot_set_is_sorted_and_has_no_duplicates() {
        let mut set = SlotSet::from([5, 1]);
        assert!(set.insert(3));
        assert!(!set.insert(5));
        set.extend([9, 0, 7, 3]);
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 1, 3, 5, 7, 9]);
        assert!(set.contains(&7) && !set.contains(&4));
        assert!(SlotSet::new().is_empty());
    }
}
