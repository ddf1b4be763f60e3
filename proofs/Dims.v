(** * Dims: dimension expressions as polynomials over the naturals (spec section 3).

    A dim is a literal, a variable, or [+], [*], [/] of dims. Variables range over the
    positive integers; a [where] clause is a list of constraints over dims. Two dims are
    _provably equal_ under assumptions [A] when they evaluate alike at every admissible
    valuation: this is the obligation kinac discharges by polynomial normalisation and Z3. *)
From Coq Require Import List Arith String Lia.
Import ListNotations.

Inductive dim : Type :=
| DLit (n : nat)
| DVar (v : string)
| DAdd (a b : dim)
| DMul (a b : dim)
| DDiv (a b : dim).  (** exact division: an obligation that [b] divides [a] *)

Definition valuation := string -> nat.

Fixpoint eval_dim (r : valuation) (d : dim) : nat :=
  match d with
  | DLit n => n
  | DVar v => r v
  | DAdd a b => eval_dim r a + eval_dim r b
  | DMul a b => eval_dim r a * eval_dim r b
  | DDiv a b => Nat.div (eval_dim r a) (eval_dim r b)
  end.

(** [where] constraints; [>] and [>=] are [<] and [<=] with the sides swapped. *)
Inductive constr : Type :=
| CEq (a b : dim)
| CLt (a b : dim)
| CLe (a b : dim)
| CDivides (a b : dim).  (** [a] divides [b] *)

Definition holds (r : valuation) (c : constr) : Prop :=
  match c with
  | CEq a b => eval_dim r a = eval_dim r b
  | CLt a b => eval_dim r a < eval_dim r b
  | CLe a b => eval_dim r a <= eval_dim r b
  | CDivides a b => exists k, eval_dim r b = k * eval_dim r a
  end.

(** A valuation is admissible for assumptions [A]: every variable is positive and every
    assumption holds. *)
Definition admissible (A : list constr) (r : valuation) : Prop :=
  (forall v, 1 <= r v) /\ Forall (holds r) A.

Definition provably_eq (A : list constr) (a b : dim) : Prop :=
  forall r, admissible A r -> eval_dim r a = eval_dim r b.

Lemma provably_eq_refl : forall A d, provably_eq A d d.
Proof. unfold provably_eq; auto. Qed.

Lemma provably_eq_sym : forall A a b, provably_eq A a b -> provably_eq A b a.
Proof. unfold provably_eq; intros; symmetry; auto. Qed.

Lemma provably_eq_trans :
  forall A a b c, provably_eq A a b -> provably_eq A b c -> provably_eq A a c.
Proof. unfold provably_eq; intros; rewrite H; auto. Qed.

(** Syntactic equality of dims: the cheap first test of the checker (sound for
    [provably_eq] under any assumptions). *)
Fixpoint dim_eqb (a b : dim) : bool :=
  match a, b with
  | DLit n, DLit m => Nat.eqb n m
  | DVar v, DVar w => String.eqb v w
  | DAdd a1 a2, DAdd b1 b2 | DMul a1 a2, DMul b1 b2 | DDiv a1 a2, DDiv b1 b2 =>
      dim_eqb a1 b1 && dim_eqb a2 b2
  | _, _ => false
  end.

Lemma dim_eqb_eq : forall a b, dim_eqb a b = true -> a = b.
Proof.
  induction a; destruct b; simpl; intros H; try discriminate.
  - apply Nat.eqb_eq in H; subst; reflexivity.
  - apply String.eqb_eq in H; subst; reflexivity.
  - apply andb_prop in H as [H1 H2]; rewrite (IHa1 _ H1), (IHa2 _ H2); reflexivity.
  - apply andb_prop in H as [H1 H2]; rewrite (IHa1 _ H1), (IHa2 _ H2); reflexivity.
  - apply andb_prop in H as [H1 H2]; rewrite (IHa1 _ H1), (IHa2 _ H2); reflexivity.
Qed.
