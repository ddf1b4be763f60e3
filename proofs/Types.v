(** * Types (spec section 3): dtypes and dtype variables, devices, shapes with a variadic
    group, tensor types; their instantiation at concrete dims (an entry's specialisation). *)
From Coq Require Import List Arith String Bool.
From Kina Require Import Dims.
Import ListNotations.

Inductive base : Type := F64 | F32 | F16 | BF16 | I64 | I32 | Bool.

Definition base_eqb (a b : base) : bool :=
  match a, b with
  | F64, F64 | F32, F32 | F16, F16 | BF16, BF16 | I64, I64 | I32, I32 | Bool, Bool => true
  | _, _ => false
  end.

Lemma base_eqb_eq : forall a b, base_eqb a b = true <-> a = b.
Proof. destruct a, b; simpl; split; intro H; congruence. Qed.

Definition is_float_base (b : base) : bool :=
  match b with F64 | F32 | F16 | BF16 => true | _ => false end.

(** A dtype: a concrete one, a dtype variable (quantified per defn; kinac's dtype variables
    range over the float dtypes, docs/language.md), or the dtype of a weak literal
    ([WeakF] for [1.0], [WeakI] for [2]), which takes the dtype of the tensor it meets. *)
Inductive dtype : Type :=
| DT (b : base)
| DTVar (v : string)
| WeakF
| WeakI.

Definition dtype_eqb (a b : dtype) : bool :=
  match a, b with
  | DT x, DT y => base_eqb x y
  | DTVar v, DTVar w => String.eqb v w
  | WeakF, WeakF | WeakI, WeakI => true
  | _, _ => false
  end.

Lemma dtype_eqb_eq : forall a b, dtype_eqb a b = true -> a = b.
Proof.
  destruct a as [x|v| |], b as [y|w| |]; simpl; intro H; try discriminate; try reflexivity.
  - apply base_eqb_eq in H; subst; reflexivity.
  - apply String.eqb_eq in H; subst; reflexivity.
Qed.

Definition is_weak (d : dtype) : bool :=
  match d with WeakF | WeakI => true | _ => false end.

(** Placement: unannotated ([DevAny], the build target's default), [@cpu], [@cuda(N)]. *)
Inductive device : Type := DevAny | DevCpu | DevCuda (n : nat).

Definition device_eqb (a b : device) : bool :=
  match a, b with
  | DevAny, DevAny | DevCpu, DevCpu => true
  | DevCuda n, DevCuda m => Nat.eqb n m
  | _, _ => false
  end.

(** A shape: an optional leading variadic group ([..b]) and the fixed dims after it. *)
Record shape : Type := Shape { group : option string; fixed : list dim }.

Definition scalar : shape := Shape None [].

Record ty : Type := Ty { ty_dtype : dtype; ty_shape : shape; ty_device : device }.

(** Well-formed types: a weak literal is a rank-0 value with no placement. *)
Definition wf_ty (t : ty) : Prop :=
  is_weak (ty_dtype t) = true -> ty_shape t = scalar /\ ty_device t = DevAny.

(** ** Concrete types: what a value has at run time (dims are integers, no variables). *)
Record cty : Type := CTy { c_dtype : dtype; c_shape : list nat; c_device : device }.

(** An instantiation: values of the dim variables, of the variadic groups and of the dtype
    variables (one specialisation of a defn). *)
Record inst : Type := Inst {
  i_dims : valuation;
  i_groups : string -> list nat;
  i_dtypes : string -> base
}.

(** Admissible for assumptions [A]: dims positive, [where] clauses true, group dims
    positive, dtype variables float. *)
Definition inst_ok (A : list constr) (i : inst) : Prop :=
  admissible A (i_dims i)
  /\ (forall g, Forall (fun n => 1 <= n) (i_groups i g))
  /\ (forall v, is_float_base (i_dtypes i v) = true).

Definition inst_dtype (i : inst) (d : dtype) : dtype :=
  match d with DTVar v => DT (i_dtypes i v) | _ => d end.

Definition inst_shape (i : inst) (s : shape) : list nat :=
  match group s with Some g => i_groups i g | None => [] end
  ++ map (eval_dim (i_dims i)) (fixed s).

Definition inst_ty (i : inst) (t : ty) : cty :=
  CTy (inst_dtype i (ty_dtype t)) (inst_shape i (ty_shape t)) (ty_device t).
